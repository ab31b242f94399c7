"""ONNX Runtime: Llama 4's attention as torch.onnx exports transformers' Llama4TextAttention (interleaved RoPE from cos
and sin caches, the weightless L2Norm as Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul in float32 at least, the NoPE
layers' temperature as Floor, Log, Mul, Add on the positions) into the Attention operator, grouped heads and the chunks
its boolean attn_mask; chunked_attention through the masked graph. Opset 23 has no chunks: the mask is built in NumPy,
as window_attention's band is."""

import numpy as np
from onnx import TensorProto

from .bands import _zeroed
from .heads import masked_attention
from .logits import _merged
from .rotary import _caches, _turned
from .shared import _attend_one_head, _one_head, _run


def _chunked_hidden(padding, chunk):
    """[B, T, T], True = hidden: causal within chunks counted from each row's first real token, and the padding."""
    T, first = padding.shape[-1], np.argmax(~padding, axis=-1)[:, None, None]
    i, j = np.arange(T)[:, None] - first, np.arange(T)[None, :] - first
    return (j > i) | (j // chunk != i // chunk) | padding[:, None, :]


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    padding = np.asarray(padding, dtype=bool)
    out = masked_attention(x, w_query, w_key, w_value, _chunked_hidden(padding, chunk))
    return {"weights": _zeroed(out["weights"], padding), "context": _zeroed(out["context"], padding)}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    padding = np.asarray(padding, dtype=bool)
    attend = ~_chunked_hidden(padding, chunk)[:, None]  # [B, 1, T, T], True = the key takes part (ONNX's polarity)
    return _zeroed(_attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)), mask=attend), padding)


def _wide(g):
    return TensorProto.DOUBLE if g.elem == TensorProto.DOUBLE else TensorProto.FLOAT


def _l2_norm(g, t, eps):
    hidden = g("Cast", t, to=_wide(g))
    mean = g("ReduceMean", g("Pow", hidden, g.const(2.0, _wide(g))), g.const([-1], TensorProto.INT64), keepdims=1)
    normed = g("Mul", hidden, g("Reciprocal", g("Sqrt", g("Add", mean, g.const(eps, _wide(g))))))
    return g("Cast", normed, to=g.elem)


def _llama4(g, ranks, num_heads, num_kv_heads, use_rope, H, floor_scale, attn_scale, eps):
    rank, one = ranks["x"], g.const(1.0, _wide(g))
    query = g.heads(g("MatMul", "rows", "w_query"), num_heads, rank)
    key = g.heads(g("MatMul", "x", "w_key"), num_kv_heads, rank)
    value = g.heads(g("MatMul", "x", "w_value"), num_kv_heads, rank)
    if use_rope:
        query = _l2_norm(g, _turned(g, query, "interleaved", H, "cos_q", "sin_q"), eps)
        key = _l2_norm(g, _turned(g, key, "interleaved", H, "cos", "sin"), eps)
    elif attn_scale:  # "positions": the queries' cache_position, [T_q, 1]
        steps = g("Floor", g("Div", g("Add", "positions", one), g.const(float(floor_scale), _wide(g))))
        scales = g("Add", g("Mul", g("Log", g("Add", steps, one)), g.const(attn_scale, _wide(g))), one)
        query = g("Cast", g("Mul", g("Cast", query, to=_wide(g)), scales), to=g.elem)
    context = g("Attention", query, key, value, "mask")  # fewer K/V heads than query heads: grouped
    return {"queries": query, "context": _merged(g, context, rank)}


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = np.asarray(x)
    T, H = x.shape[-2], np.shape(w_query)[-1] // num_heads
    wide = np.float64 if x.dtype == np.float64 else np.float32
    cos, sin = _caches(np.arange(T), H, 10000.0, "none", 1.0, x.dtype)
    i, j = np.arange(start, T)[:, None], np.arange(T)[None, :]
    hidden = (j > i) | ((j // chunk != i // chunk) if use_rope and chunk else False)
    arrays = {"x": x, "rows": x[..., start:, :], "w_query": w_query, "w_key": w_key, "w_value": w_value}
    arrays |= {"cos": cos, "sin": sin, "cos_q": cos[start:], "sin_q": sin[start:], "mask": ~hidden[None, None]}
    arrays["positions"] = np.arange(start, T, dtype=wide)[:, None]
    static = (
        int(num_heads),
        int(num_kv_heads),
        bool(use_rope),
        int(H),
        int(floor_scale),
        float(attn_scale),
        float(eps),
    )
    out = _run(_llama4, *static, **arrays)
    return {"queries": out["queries"], "context": out["context"]}
