"""PyTorch: what the families share: NumPy to torch and back (bfloat16 by its bits), the causal mask, heads split."""

import functools

import ml_dtypes
import numpy as np
import torch


def _t(a):
    if isinstance(a, torch.Tensor):  # in_mode's compiled boundary converted it already (modes.py)
        return a
    return _from_numpy(a)


# Under torch.compile NumPy runs outside the graph (here and in _on_numpy): dynamo would trace it as torch._numpy,
# which has no bfloat16 (KeyError: torch.bfloat16, measured). In eager the decorator changes nothing.
@torch.compiler.disable
def _from_numpy(a):
    a = np.array(a)  # a copy: torch never aliases the caller's data
    if a.dtype == ml_dtypes.bfloat16:  # NumPy has no bfloat16 of its own; same bits, torch's dtype
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _np(t):
    t = t.detach()
    if torch.compiler.is_compiling():  # traced: the tensor leaves the graph, in_mode's boundary converts it
        return t
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _on_numpy(fn):
    """`fn`, NumPy code (the suite's ports), called with NumPy arrays where it was given tensors (traced ones)."""

    @functools.wraps(fn)
    @torch.compiler.disable
    def run(*args):
        return fn(*_map(args, torch.Tensor, _np))

    return run


def _map(value, kind, convert):
    """`convert` applied to every `kind` in nested dicts, lists and tuples; everything else as it is."""
    if isinstance(value, kind):
        return convert(value)
    if isinstance(value, dict):
        return {k: _map(v, kind, convert) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_map(v, kind, convert) for v in value)
    return value


def _causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # above the diagonal: the future


def _split_heads(
    t, n, head_dim
):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head, as SDPA takes them; a view, no copy
    return t.view(*t.shape[:-1], n, head_dim).transpose(-3, -2)
