"""ONNX Runtime: the scores before the softmax past the documents': soft-capping (Gemma 2's order) and gpt-oss's
sinks as graphs of its operators, and soft-capping through the Attention operator's own `softcap`."""

import numpy as np
from onnx import TensorProto

from .shared import _batched, _one_head, _run


def _softcap(g, ranks, cap, causal):
    key, value = g("MatMul", "x", "w_key"), g("MatMul", "x", "w_value")
    scores = g("MatMul", g("MatMul", "x", "w_query"), g.t(key, ranks["x"]))
    scaled = g.scaled(scores, key)
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        scaled = g("Mul", g("Tanh", g("Div", scaled, g.const(cap))), g.const(cap))
    if causal:
        scaled = g("Where", "mask", g.const(-np.inf), scaled)
    weights = g("Softmax", scaled, axis=-1)
    return {"weights": weights, "context": g("MatMul", weights, value)}


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    T = np.shape(x)[-2]
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    if causal:
        arrays["mask"] = np.triu(np.ones((T, T), dtype=bool), k=1)
    out = _run(_softcap, float(cap), bool(causal), **arrays)
    return {"weights": out["weights"], "context": out["context"]}


def _capped_sdpa(g, ranks, cap, causal):
    return {"context": g("Attention", "q", "k", "v", is_causal=int(causal), softcap=float(cap))}


def softcap_flag(x, w_query, w_key, w_value, cap, causal):
    q, k, v = (_one_head(x, w) for w in (w_query, w_key, w_value))
    context = _run(_capped_sdpa, float(cap), bool(causal), q=q, k=k, v=v)["context"]
    return context[:, 0] if np.ndim(x) == 3 else context[0, 0]


def _sinks(g, ranks, num_heads):
    rank = ranks["x"]
    query, key, value = (g.heads(g("MatMul", "x", w), num_heads, rank) for w in ("w_query", "w_key", "w_value"))
    scaled = g.scaled(g("MatMul", query, g.t(key, rank + 1)), key)
    hidden = g("Unsqueeze", "mask", g.const([-3], TensorProto.INT64))  # [B, 1, T, S]: every head
    scaled = g("Where", hidden, g.const(-np.inf), scaled)
    column = g("Concat", g("Shape", scaled, end=-1), g.const([1], TensorProto.INT64), axis=0)
    sink = g("Expand", g("Reshape", "sinks", g.const([num_heads, 1, 1], TensorProto.INT64)), column)
    every = g("Softmax", g("Concat", scaled, sink, axis=-1), axis=-1)
    weights = g("Slice", every, *(g.const([v], TensorProto.INT64) for v in (0, -1, -1)))  # the sink's column dropped
    context = g("Transpose", g("MatMul", weights, value), perm=[*range(rank - 2), rank - 1, rank - 2, rank])
    return {"weights": weights, "context": g("Reshape", context, g.const([0] * (rank - 1) + [-1], TensorProto.INT64))}


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    arrays = {"x": _batched(x), "w_query": w_query, "w_key": w_key, "w_value": w_value}
    out = _run(_sinks, num_heads, **arrays, sinks=np.asarray(sinks), mask=np.asarray(mask, dtype=bool))
    return {"weights": out["weights"], "context": out["context"]}
