"""Llama 4's attention (spec conventions.chunked_attention, temperature_tuning and l2_qk_norm): causal attention
within chunks of positions, the NoPE layers' query temperature, and the RoPE layers' QK-norm with no weight."""

from decimal import Decimal, localcontext

import numpy as np

from attention_conformance import bounds, elementary, sides

from .bands import _zeroed
from .documents import project
from .heads import _masked_head
from .norms import _rms_norm
from .rotary import THETA, _cos_sin, _rotated
from .shared import _bounded, _f64


def _chunked(T, chunk, first, start=0):
    """Key j hidden from query i (rows start..T-1): the future, and a key of another chunk, the chunks `chunk`
    positions long counted from `first` ([B, 1, 1], each row's first real token; 0 for all)."""
    i, j = np.arange(start, T)[:, None], np.arange(T)[None, :]
    return (j > i) | ((j - first) // chunk != (i - first) // chunk)


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    """One head, causal within chunks of `chunk` tokens (conventions.chunked_attention), each row of the batch left-
    padded by `padding` [B, T] (True = padding, leading): its chunks start at its first real token, its first False
    (transformers' chunked_overlay with left_padding) or, on the other side of the split, at index 0
    (_legacy_chunked_overlay). A padding token is hidden as a key; its own row is 0, as attention_ref returns them."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    padding = np.asarray(padding, dtype=bool)
    T = padding.shape[-1]
    first = np.argmax(~padding, axis=-1)[:, None, None] if sides.of("chunk_alignment") == "first_token" else 0
    hidden = _chunked(T, chunk, first) | padding[:, None, :]
    weights, context = _masked_head(project(x, w_query), project(x, w_key), project(x, w_value), hidden)
    rows = padding[..., :, None]
    return {"weights": _zeroed(weights, rows), "context": _zeroed(context, rows)}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):  # what a fused attention given the chunks must compute
    return chunked_attention(x, w_query, w_key, w_value, chunk, padding)["context"]


def _temperature(positions, floor_scale, attn_scale, like):
    """Llama 4's NoPE query scale at each position p, log(floor((p + 1) / floor_scale) + 1) attn_scale + 1 (Decimal:
    the same bytes everywhere), as frameworks compute it: in float32 at least (the floor exact there for p < 2**24
    and an integer floor_scale), stored in the dtype (Meta's llama-models casts it; transformers multiplies in
    float32, one rounding fewer, inside this bound)."""
    with localcontext() as exact:
        exact.prec = 40
        logs = np.array([float((Decimal(int(p + 1) // int(floor_scale)) + 1).ln()) for p in positions])
        scales = np.array([float(Decimal(v) * Decimal(attn_scale) + 1) for v in logs])
    if not _bounded(like):
        return scales[:, None]
    with bounds.in_float32_at_least():
        scales = bounds.Bounded(scales, (elementary.log(logs) * attn_scale + 1.0).err)
    return _f64(scales[:, None])[0]


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    """A Llama 4 text layer's attention (transformers' Llama4TextAttention) for the queries start..T-1 over keys
    0..T-1, query head n over K/V head n // (N / num_kv_heads). A RoPE layer (use_rope): each head turned (interleaved
    pairs, theta 10000), then queries and keys RMS-normed with no weight (its L2Norm), attended causally within chunks
    of `chunk` positions from 0 (0: no chunks). A NoPE layer: no rotation and no norm, the queries scaled by their
    position's temperature (attn_scale 0: none), attended causally over every key. queries [.., N, T - start, H] as
    they enter the scores; context the heads concatenated."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys = _f64(project(x[..., start:, :], w_query), project(x, w_key))
    values = project(x, w_value)
    if use_rope:
        cos, sin = _cos_sin(np.arange(T), H, THETA, "none", 1.0, x)
        turn = lambda t, rows: _rms_norm(_rotated(t, cos[rows], sin[rows], "interleaved", H), None, eps)  # noqa: E731
    elif attn_scale:
        scales = _temperature(np.arange(start, T), floor_scale, attn_scale, x)
    hidden = _chunked(T, chunk, 0, start) if use_rope and chunk else _chunked(T, T, 0, start)
    group, turned, contexts = num_heads // num_kv_heads, [], []
    for n in range(num_heads):
        kv = slice(n // group * H, (n // group + 1) * H)
        q, k = queries[..., n * H : (n + 1) * H], keys[..., kv]
        if use_rope:
            q, k = turn(q, slice(start, T)), turn(k, slice(0, T))
        elif attn_scale:
            (q,) = _f64(q * scales)
        turned.append(q)
        contexts.append(_masked_head(q, k, values[..., kv], hidden)[1])
    return {"queries": np.stack(turned, axis=-3), "context": np.concatenate(contexts, axis=-1)}
