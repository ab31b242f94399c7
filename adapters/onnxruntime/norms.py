"""ONNX Runtime: QK-norm (spec conventions.qk_norm) as torch.onnx exports HF's Qwen3RMSNorm (Cast to float32, Pow 2,
ReduceMean, Add eps, Sqrt, Reciprocal: torchlib's aten_rsqrt is "op.Reciprocal(op.Sqrt(self))"; Mul, Cast back, Mul
by the weight; float64 stays float64), per head or over the whole projection, before a rotate_half RoPE from cos and
sin caches; and through ONNX's own operators, RMSNormalization (opset 23) into the Attention operator.

RMSNormalization's schema (onnx 1.23.2, opset 23): "XSquared = Mul(X, X); XSquaredMean =
ReduceMean<axes=normalized_axes>(XSquared); MeanSquareEpsilon = Add(XSquaredMean, epsilon); RMS =
Sqrt(MeanSquareEpsilon); Normalized = Div(X, RMS)" (eps inside the root), "where normalized_axes is [axis, ...,
rank of X - 1]" (axis=-1: each head's H dims, or the projection's N*H), "if stash_type is 1, this operator casts all
input variables to 32-bit float, perform the computation, and finally cast Normalized back to the original type of
X", then "Y = Mul(Normalized, Scale)": cast back before the weight (Qwen3's order). Its epsilon is a FLOAT
attribute, so a float64 graph's eps is float32's nearest."""

import numpy as np
from onnx import TensorProto

from .logits import _merged
from .rotary import _caches, _turned
from .shared import _run


def _rms_norm(g, t, weight, eps):
    wide = TensorProto.DOUBLE if g.elem == TensorProto.DOUBLE else TensorProto.FLOAT
    hidden = g("Cast", t, to=wide)
    variance = g("ReduceMean", g("Pow", hidden, g.const(2.0, wide)), g.const([-1], TensorProto.INT64), keepdims=1)
    hidden = g("Mul", hidden, g("Reciprocal", g("Sqrt", g("Add", variance, g.const(eps, wide)))))
    return g("Mul", weight, g("Cast", hidden, to=g.elem))


def _own_rms_norm(g, t, weight, eps):
    stash = TensorProto.DOUBLE if g.elem == TensorProto.DOUBLE else TensorProto.FLOAT
    return g("RMSNormalization", t, weight, axis=-1, epsilon=eps, stash_type=stash)


def _normed_heads(g, ranks, norm, num_heads, H, eps, per_head):
    """[B, N, T, H] queries, keys (normed, then turned by the cos and sin caches) and values."""
    rank = ranks["x"]
    query, key, value = (g("MatMul", "x", w) for w in ("w_query", "w_key", "w_value"))
    if per_head:  # Qwen3, Gemma 3: the projection viewed as heads, each head's H dims normed
        query, key = g.heads(query, num_heads, rank), g.heads(key, num_heads, rank)
        query, key = norm(g, query, "norm_weight_q", eps), norm(g, key, "norm_weight_k", eps)
    else:  # OLMo 2: the whole projection normed, then split
        query, key = norm(g, query, "norm_weight_q", eps), norm(g, key, "norm_weight_k", eps)
        query, key = g.heads(query, num_heads, rank), g.heads(key, num_heads, rank)
    query, key = (_turned(g, t, "rotate_half", H, "cos", "sin") for t in (query, key))
    return query, key, g.heads(value, num_heads, rank)


def _qk_norm(g, ranks, num_heads, H, eps, per_head, causal):
    query, key, value = _normed_heads(g, ranks, _rms_norm, num_heads, H, eps, per_head)
    scaled = g.scaled(g("MatMul", query, g.t(key, ranks["x"] + 1)), key)
    if causal:
        scaled = g("Where", "mask", g.const(-np.inf), scaled)
    weights = g("Softmax", scaled, axis=-1)
    return {"queries": query, "weights": weights, "context": _merged(g, g("MatMul", weights, value), ranks["x"])}


def _qk_norm_sdpa(g, ranks, num_heads, H, eps, per_head, causal):
    query, key, value = _normed_heads(g, ranks, _own_rms_norm, num_heads, H, eps, per_head)
    context = g("Attention", query, key, value, is_causal=int(causal))
    return {"queries": query, "context": _merged(g, context, ranks["x"])}


def _norm_arrays(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, causal):
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    cos, sin = _caches(np.arange(T), H, 10000.0, "none", 1.0, np.asarray(x).dtype)
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "cos": cos, "sin": sin}
    arrays |= {"norm_weight_q": norm_weight_q, "norm_weight_k": norm_weight_k}
    if causal:
        arrays["mask"] = np.triu(np.ones((T, T), dtype=bool), k=1)
    return int(H), arrays


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    H, arrays = _norm_arrays(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, causal)
    return _run(_qk_norm, int(num_heads), H, float(eps), bool(per_head), bool(causal), **arrays)


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    H, arrays = _norm_arrays(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, False)
    return _run(_qk_norm_sdpa, int(num_heads), H, float(eps), bool(per_head), bool(causal), **arrays)
