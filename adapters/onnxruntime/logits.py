"""ONNX Runtime: the scores before the softmax past the documents': soft-capping (Gemma 2's order), gpt-oss's sinks
and a decoder with all of them as graphs of its operators; soft-capping, the stages' scores and the scale through the
Attention operator's own attributes."""

import numpy as np
from onnx import TensorProto

from .rotary import _caches, _turned
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
    weights = _sink_softmax(g, g("Where", hidden, g.const(-np.inf), scaled), num_heads)
    return {"weights": weights, "context": _merged(g, g("MatMul", weights, value), rank)}


def _sink_softmax(g, scaled, num_heads):
    """The softmax of [.., N, T, S] scores beside head n's sink, its column dropped after."""
    column = g("Concat", g("Shape", scaled, end=-1), g.const([1], TensorProto.INT64), axis=0)
    sink = g("Expand", g("Reshape", "sinks", g.const([num_heads, 1, 1], TensorProto.INT64)), column)
    every = g("Softmax", g("Concat", scaled, sink, axis=-1), axis=-1)
    return g("Slice", every, *(g.const([v], TensorProto.INT64) for v in (0, -1, -1)))


def _merged(g, heads, rank):  # (.., N, T, H) -> (.., T, N*H)
    context = g("Transpose", heads, perm=[*range(rank - 2), rank - 1, rank - 2, rank])
    return g("Reshape", context, g.const([0] * (rank - 1) + [-1], TensorProto.INT64))


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    arrays = {"x": _batched(x), "w_query": w_query, "w_key": w_key, "w_value": w_value}
    out = _run(_sinks, num_heads, **arrays, sinks=np.asarray(sinks), mask=np.asarray(mask, dtype=bool))
    return {"weights": out["weights"], "context": out["context"]}


def _decoder(g, ranks, num_heads, num_kv_heads, pairing, H, cap):
    rank, group = ranks["x"], num_heads // num_kv_heads
    query = _turned(g, g.heads(g("MatMul", "x", "w_query"), num_heads, rank), pairing, H, "cos", "sin")

    def repeated(t):
        return g.repeated(t, num_kv_heads, group, query)

    key = repeated(_turned(g, g.heads(g("MatMul", "x", "w_key"), num_kv_heads, rank), pairing, H, "cos", "sin"))
    scaled = g.scaled(g("MatMul", query, g.t(key, rank + 1)), key)
    if cap:
        scaled = g("Mul", g("Tanh", g("Div", scaled, g.const(cap))), g.const(cap))
    weights = _sink_softmax(g, g("Where", "mask", g.const(-np.inf), scaled), num_heads)
    value = repeated(g.heads(g("MatMul", "x", "w_value"), num_kv_heads, rank))
    return {"context": _merged(g, g("MatMul", weights, value), rank)}


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = np.asarray(x)
    T, H = x.shape[-2], np.shape(w_query)[-1] // num_heads
    cos, sin = _caches(np.arange(T), H, 10000.0, "none", 1.0, x.dtype)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "cos": cos, "sin": sin}
    band = (j > i) | (j <= i - window)  # the window's band, built in NumPy: opset 23 has none
    out = _run(_decoder, num_heads, num_kv_heads, pairing, H, float(cap), **arrays, mask=band, sinks=np.asarray(sinks))
    return out["context"]


def _stages(g, ranks, cap, causal):
    modes = {"scaled": 0, "capped": 1, "weights": 3}  # qk_matmul_output_mode: 2 adds the mask after the cap
    return {
        name: g("Attention", "q", "k", "v", "", "", "", outputs=4, is_causal=int(causal), softcap=cap,
                qk_matmul_output_mode=mode)[3]
        for name, mode in modes.items()
    }  # fmt: skip


def attention_stages(x, w_query, w_key, w_value, cap, causal):
    q, k, v = (_one_head(x, w) for w in (w_query, w_key, w_value))
    return {name: out[:, 0] for name, out in _run(_stages, float(cap), bool(causal), q=q, k=k, v=v).items()}


def _scaled_sdpa(g, ranks, scale, causal):
    return {"context": g("Attention", "q", "k", "v", is_causal=int(causal), scale=scale)}


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    q, k, v = (_one_head(x, w) for w in (w_query, w_key, w_value))
    return _run(_scaled_sdpa, float(softmax_scale), bool(causal), q=q, k=k, v=v)["context"][:, 0]
