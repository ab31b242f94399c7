"""ONNX Runtime: cross-attention as a graph of its operators (queries from x, keys and values from the memory, its
padding a Where) and through the Attention operator with q and k/v of different lengths and a boolean attn_mask; T5's
relative position bias as a graph (HF's bucket: the log in float32, Cast to int64), on unscaled scores."""

import math

import numpy as np
from onnx import TensorProto

from .logits import _merged
from .shared import _run

_I64 = TensorProto.INT64


def _cross(g, ranks, num_heads, fused):
    rank = ranks["x"]
    query = g.heads(g("MatMul", "x", "w_query"), num_heads, rank)
    key, value = (g.heads(g("MatMul", "memory", w), num_heads, rank) for w in ("w_key", "w_value"))
    if fused:  # attn_mask [B, 1, 1, S], True = the key takes part; q's T and k/v's S apart
        return {"context": _merged(g, g("Attention", query, key, value, "attend"), rank)}
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, rank + 1)), key, "hidden")  # hidden: True = padded
    return {"weights": weights, "context": _merged(g, g("MatMul", weights, value), rank)}


def _cross_arrays(x, memory, w_query, w_key, w_value):
    return {"x": x, "memory": memory, "w_query": w_query, "w_key": w_key, "w_value": w_value}


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    hidden = np.asarray(padding, dtype=bool)[:, None, None, :]
    out = _run(_cross, int(num_heads), False, **_cross_arrays(x, memory, w_query, w_key, w_value), hidden=hidden)
    return {"weights": out["weights"], "context": out["context"]}


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    # [B, 1, T, S]: the specification broadcasts a mask's query axis, onnxruntime 1.31.1's float32 CPU kernel does not
    # ("inconsistent q_sequence_length (between attn_mask and Q)" for [B, 1, 1, S], measured; its float64 one does)
    attend = np.broadcast_to(
        ~np.asarray(padding, dtype=bool)[:, None, None, :], (len(padding), 1, np.shape(x)[-2], np.shape(padding)[-1])
    )
    return _run(_cross, int(num_heads), True, **_cross_arrays(x, memory, w_query, w_key, w_value), attend=attend)[
        "context"
    ]


def _buckets(g, T, S, num_buckets, max_distance, bidirectional):
    """HF's _relative_position_bucket as nodes: key minus query, int64; the log of a float32 Cast, Cast to int64."""
    positions = [g("Range", g.const(0, _I64), n, g.const(1, _I64)) for n in (S, T)]
    relative = g(
        "Sub", g("Unsqueeze", positions[0], g.const([0], _I64)), g("Unsqueeze", positions[1], g.const([1], _I64))
    )
    offset = g.const(0, _I64)
    if bidirectional:
        num_buckets //= 2
        offset = g("Mul", g("Cast", g("Greater", relative, g.const(0, _I64)), to=_I64), g.const(num_buckets, _I64))
        relative = g("Abs", relative)
    else:
        relative = g("Neg", g("Min", relative, g.const(0, _I64)))
    max_exact = num_buckets // 2
    f32 = TensorProto.FLOAT
    log = g("Log", g("Div", g("Cast", relative, to=f32), g.const(max_exact, f32)))
    scaled = g(
        "Mul", g("Div", log, g.const(math.log(max_distance / max_exact), f32)), g.const(num_buckets - max_exact, f32)
    )
    large = g("Min", g("Add", g.const(max_exact, _I64), g("Cast", scaled, to=_I64)), g.const(num_buckets - 1, _I64))
    return g("Add", offset, g("Where", g("Less", relative, g.const(max_exact, _I64)), relative, large))


def _lengths(g, name):
    return g("Squeeze", g("Shape", name, start=-2, end=-1))


def _table(g, ranks, query_length, key_length, num_buckets, max_distance, bidirectional):
    T, S = g.const(query_length, _I64), g.const(key_length, _I64)
    # the session's outputs take its inputs' element type: the buckets leave as floats, exact below 2^24
    return {"buckets": g("Cast", _buckets(g, T, S, num_buckets, max_distance, bidirectional), to=g.elem)}


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    static = (int(query_length), int(key_length), int(num_buckets), int(max_distance), bool(bidirectional))
    # a float32 input the graph never reads: the session takes its element type from its inputs' (shared._session)
    return _run(_table, *static, dtype=np.zeros(0, np.float32))["buckets"].astype(np.int64)


def _t5(g, ranks, num_heads, num_buckets, max_distance, bidirectional):
    rank = ranks["x"]
    query, key, value = (g.heads(g("MatMul", "x", w), num_heads, rank) for w in ("w_query", "w_key", "w_value"))
    T = _lengths(g, "x")
    bias = g("Gather", "bias_table", _buckets(g, T, T, num_buckets, max_distance, bidirectional))  # [T, S, N]
    scores = g("Add", g("MatMul", query, g.t(key, rank + 1)), g("Transpose", bias, perm=[2, 0, 1]))  # no 1/sqrt(H)
    if "mask" in ranks:
        scores = g("Where", "mask", g.const(-np.inf), scores)
    weights = g("Softmax", scores, axis=-1)
    return {"weights": weights, "context": _merged(g, g("MatMul", weights, value), rank)}


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    T = np.shape(x)[-2]
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "bias_table": bias_table}
    if causal:
        arrays["mask"] = np.triu(np.ones((T, T), dtype=bool), k=1)
    static = (int(num_heads), int(num_buckets), int(max_distance), bool(bidirectional))
    out = _run(_t5, *static, **arrays)
    return {"weights": out["weights"], "context": out["context"]}
