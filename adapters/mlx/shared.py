"""MLX: what the families share: NumPy to mx.array and back, the masked softmax, the causal mask, heads split."""

import functools
import threading

import ml_dtypes
import mlx.core as mx
import numpy as np

# Set by modes.in_mode while mx.compile traces an op: its arrays then stay mx.arrays, since reading one
# (np.array) inside a traced function raises; the boundary converts the outputs instead.
_tracing = threading.local()

_DTYPES = {"float64": mx.float64, "float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


def _mx(a):
    if isinstance(a, mx.array):  # already MLX's (a traced input): converting it would evaluate it
        return a
    a = np.asarray(a)
    if a.dtype == bool:
        return mx.array(a)
    return mx.array(a, dtype=_DTYPES[a.dtype.name])  # mx.array alone turns float64 into float32


def _core(fn):
    """An op's MLX part where NumPy surrounds it (a checkpoint's port, ports.py): what a compiled mode compiles
    of that op, through the boundary it sets (modes.py); as written otherwise."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        boundary = getattr(_tracing, "boundary", None)
        return boundary(fn)(*args, **kwargs) if boundary else fn(*args, **kwargs)

    return run


def _np(a):
    if getattr(_tracing, "on", False):
        return a
    if a.dtype == mx.bfloat16:  # NumPy cannot take MLX's bfloat16 buffer; float32 holds it exactly
        return np.array(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.array(a)


def _masked_weights(attn_scores, keys, hidden):
    attn_scores = mx.where(hidden, -mx.inf, attn_scores)  # True = hidden
    return mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)


def _causal_mask(T_q, T_k):
    # Query i at absolute position T_k - T_q + i may see keys 0..that position: above it is the future.
    return mx.triu(mx.ones((T_q, T_k), dtype=mx.bool_), k=T_k - T_q + 1)


def _split_heads(t, n):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return t.reshape(*t.shape[:-1], n, -1).swapaxes(-3, -2)


def _heads(t, n):  # (.., T, n*H) -> (B, n, T, H): the fused kernel's layout, rank 4 only
    t = _split_heads(t, n)
    return t if t.ndim == 4 else t[None]
