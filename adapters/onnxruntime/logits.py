"""ONNX Runtime: the scores before the softmax past the documents': soft-capping (Gemma 2's order), gpt-oss's sinks,
ALiBi's bias (BLOOM's slopes from Pow) and a decoder with all of them as graphs of its operators; soft-capping, the
stages' scores, the scale and ALiBi's bias (a float attn_mask) through the Attention operator's own inputs."""

import math

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


def _alibi_slopes(g, num_heads):
    """BLOOM's build_alibi_tensor as Pow nodes: float32, float64 where the scores are."""
    wide = TensorProto.DOUBLE if g.elem == TensorProto.DOUBLE else TensorProto.FLOAT
    closest = 2 ** math.floor(math.log2(num_heads))
    bases = [(2 ** (-(2 ** -(math.log2(closest) - 3))), range(1, 1 + closest))]
    if closest != num_heads:
        bases.append((2 ** (-(2 ** -(math.log2(2 * closest) - 3))), range(1, 1 + 2 * (num_heads - closest), 2)))
    return g(
        "Concat", *(g("Pow", g.const([base], wide), g.const(list(powers), wide)) for base, powers in bases), axis=0
    )


def _alibi_bias(g, num_heads):
    """slope * (j - i), [N, T, T]: the slopes times the distances from a Range over x's tokens, in the slopes'
    precision, Cast to the scores' type."""
    slopes = _alibi_slopes(g, num_heads)
    T = g("Squeeze", g("Shape", "x", start=-2, end=-1))
    positions = g("CastLike", g("Range", g.const(0, TensorProto.INT64), T, g.const(1, TensorProto.INT64)), slopes)
    distance = g("Sub", g("Unsqueeze", positions, g.const([0], TensorProto.INT64)),
                 g("Unsqueeze", positions, g.const([1], TensorProto.INT64)))  # fmt: skip
    per_head = g("Reshape", slopes, g.const([num_heads, 1, 1], TensorProto.INT64))
    return g("Cast", g("Mul", per_head, distance), to=g.elem)


def _alibi_heads(g, ranks, num_heads):
    return (g.heads(g("MatMul", "x", w), num_heads, ranks["x"]) for w in ("w_query", "w_key", "w_value"))


def _alibi(g, ranks, num_heads, causal):
    query, key, value = _alibi_heads(g, ranks, num_heads)
    scaled = g("Add", g.scaled(g("MatMul", query, g.t(key, ranks["x"] + 1)), key), _alibi_bias(g, num_heads))
    if causal:
        scaled = g("Where", "mask", g.const(-np.inf), scaled)
    weights = g("Softmax", scaled, axis=-1)
    return {"weights": weights, "context": _merged(g, g("MatMul", weights, value), ranks["x"])}


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    T = np.shape(x)[-2]
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    if causal:
        arrays["mask"] = np.triu(np.ones((T, T), dtype=bool), k=1)
    out = _run(_alibi, int(num_heads), bool(causal), **arrays)
    return {"weights": out["weights"], "context": out["context"]}


def _biased_sdpa(g, ranks, num_heads, causal):
    query, key, value = _alibi_heads(g, ranks, num_heads)
    # attn_mask: a float mask is added to the scaled scores; is_causal hides the future on top of it
    context = g("Attention", query, key, value, _alibi_bias(g, num_heads), is_causal=int(causal))
    return {"context": _merged(g, context, ranks["x"])}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    return _run(_biased_sdpa, int(num_heads), bool(causal), **arrays)["context"]


def _slopes(g, ranks, num_heads):
    return {"slopes": _alibi_slopes(g, num_heads)}


def alibi_slopes(num_heads):
    # a float32 input the graph never reads: the session takes its element type from its inputs' (shared._session)
    return _run(_slopes, int(num_heads), dtype=np.zeros(0, np.float32))["slopes"]


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
