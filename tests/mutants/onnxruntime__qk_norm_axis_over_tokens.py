"""RMSNormalization with axis=-2 on per-head queries [B, N, T, H]: ONNX normalises over every axis from `axis` to the
last ("normalized_axes is [axis, ..., rank of X - 1]"), so each head is normed over all its tokens' T*H values at
once rather than each token's H; the weight [H] still broadcasts, so nothing raises."""

from onnx import TensorProto

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.logits import _merged
from attention_conformance.adapters.onnxruntime.norms import _norm_arrays, _normed_heads
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_flag_qwen3_causal", "qk_norm_flag_gemma_offset_weight", "qk_norm_flag_wide_heads")


def _token_rms_norm(g, t, weight, eps):
    stash = TensorProto.DOUBLE if g.elem == TensorProto.DOUBLE else TensorProto.FLOAT
    return g("RMSNormalization", t, weight, axis=-2, epsilon=eps, stash_type=stash)  # the bug: axis -2


def _wrong_sdpa(g, ranks, num_heads, H, eps, per_head, causal):
    query, key, value = _normed_heads(g, ranks, _token_rms_norm, num_heads, H, eps, per_head)
    context = g("Attention", query, key, value, is_causal=int(causal))
    return {"queries": query, "context": _merged(g, context, ranks["x"])}


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    H, arrays = _norm_arrays(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, False)
    return _run(_wrong_sdpa, int(num_heads), H, float(eps), bool(per_head), bool(causal), **arrays)
