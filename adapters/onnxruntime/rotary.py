"""ONNX Runtime: rotary position embeddings as a graph of its operators (Slice, Mul, Sub, Add, Concat) and through
its own kernel, opset 23's RotaryEmbedding; cos and sin come as caches, computed in NumPy as an exporter
computes them (float32 whatever the model's dtype, float64 for a float64 model)."""

import numpy as np
from onnx import TensorProto

from .shared import _run


def _caches(positions, rotary_dim, theta, scaling, factor, dtype):
    wide = np.float64 if dtype == np.float64 else np.float32
    inv_freq = 1.0 / theta ** (np.arange(0, rotary_dim, 2, dtype=wide) / wide(rotary_dim))
    if scaling == "linear":
        inv_freq = inv_freq / wide(factor)
    elif scaling == "llama3":  # Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original context 8192
        wavelength = wide(2 * np.pi) / inv_freq
        smooth = (8192 / wavelength - 1) / wide(4 - 1)
        blended = (1 - smooth) * inv_freq / wide(factor) + smooth * inv_freq
        kept = np.where(wavelength > 8192, inv_freq / wide(factor), inv_freq)
        inv_freq = np.where((wavelength >= 8192 / 4) & (wavelength <= 8192), blended, kept).astype(wide)
    angles = np.asarray(positions, dtype=wide)[:, None] * inv_freq
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _turned(g, t, pairing, rotary_dim, cos, sin):
    """t's first rotary_dim dims turned by the angles whose cos and sin are given, the rest as they are."""

    def part(start, stop, step=1):
        return g("Slice", t, *(g.const([v], TensorProto.INT64) for v in (start, stop, -1, step)))

    R = rotary_dim
    a, b = (part(0, R, 2), part(1, R, 2)) if pairing == "interleaved" else (part(0, R // 2), part(R // 2, R))
    first = g("Sub", g("Mul", a, cos), g("Mul", b, sin))
    second = g("Add", g("Mul", a, sin), g("Mul", b, cos))
    if pairing == "interleaved":  # (.., R/2, 2) back to (.., R): each pair side by side again
        last = g.const([-1], TensorProto.INT64)
        pairs = g("Concat", g("Unsqueeze", first, last), g("Unsqueeze", second, last), axis=-1)
        turned = g("Reshape", pairs, g("Concat", g("Shape", first, end=-1), g.const([R], TensorProto.INT64), axis=0))
    else:
        turned = g("Concat", first, second, axis=-1)
    return g("Concat", turned, part(R, 2**62), axis=-1)


def _rope(g, ranks, pairing, rotary_dim):
    return {"rotated": _turned(g, "x", pairing, rotary_dim, "cos", "sin")}


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = np.asarray(x)
    cos, sin = _caches(np.arange(position, position + x.shape[-2]), rotary_dim, theta, scaling, factor, x.dtype)
    return _run(_rope, pairing, rotary_dim, x=x, cos=cos, sin=sin)["rotated"]


def _fused_rope(g, ranks, pairing, rotary_dim):
    interleaved = int(pairing == "interleaved")
    turned = g("RotaryEmbedding", "x", "cos", "sin", "positions", interleaved=interleaved, num_heads=1,
               rotary_embedding_dim=rotary_dim)  # fmt: skip
    return {"rotated": turned}


def fused_rotary(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = np.asarray(x)
    B, T = x.shape[0], x.shape[-2]
    # The caches hold every position up to the last; the kernel gathers the tokens' rows by position_ids.
    cos, sin = _caches(np.arange(position + T), rotary_dim, theta, scaling, factor, x.dtype)
    positions = np.broadcast_to(np.arange(position, position + T), (B, T)).astype(np.int64)
    return _run(_fused_rope, pairing, rotary_dim, x=x, cos=cos, sin=sin, positions=positions)["rotated"]


def _rotary_attention(g, ranks, num_heads, pairing, rotary_dim, start):
    rank = ranks["x"]
    queries, keys, values = (g.heads(g("MatMul", "x", w), num_heads, rank) for w in ("w_query", "w_key", "w_value"))
    queries, keys = (_turned(g, t, pairing, rotary_dim, "cos", "sin") for t in (queries, keys))
    queries = g("Slice", queries, *(g.const([v], TensorProto.INT64) for v in (start, 2**62, -2)))
    weights = g.scaled_softmax(g("MatMul", queries, g.t(keys, rank + 1)), keys, "mask")
    context = g("Transpose", g("MatMul", weights, values), perm=[*range(rank - 2), rank - 1, rank - 2, rank])
    return {"context": g("Reshape", context, g.const([0] * (rank - 1) + [-1], TensorProto.INT64))}


def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    x = np.asarray(x)
    T = x.shape[-2]
    cos, sin = _caches(np.arange(T), rotary_dim, 10000.0, "none", 1.0, x.dtype)
    mask = np.arange(T)[None, :] > np.arange(start, T)[:, None]  # query p at its absolute position
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "cos": cos, "sin": sin, "mask": mask}
    return _run(_rotary_attention, num_heads, pairing, rotary_dim, start, **arrays)["context"]


def _permuted(w, num_heads, rotary_dim, pairs):
    """In each head, turned columns (2i, 2i+1) to (i, i + R/2) (HF's Llama conversion), or back: a checkpoint is
    converted before it is exported, here in NumPy."""
    D = w.shape[0]
    heads = w.reshape(D, num_heads, -1)
    grouped = heads[..., :rotary_dim].reshape(D, num_heads, *((-1, 2) if pairs else (2, -1)))
    turned = grouped.swapaxes(-1, -2).reshape(D, num_heads, rotary_dim)
    return np.concatenate([turned, heads[..., rotary_dim:]], axis=-1).reshape(D, -1)


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    w_query, w_key = np.asarray(w_query), np.asarray(w_key)
    converted = [_permuted(w, num_heads, rotary_dim, pairs=True) for w in (w_query, w_key)]
    restored = [_permuted(w, num_heads, rotary_dim, pairs=False) for w in converted]

    def context(wq, wk, pairing):
        return rotary_attention(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
