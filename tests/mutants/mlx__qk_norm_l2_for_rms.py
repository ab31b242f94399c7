"""Queries and keys scaled to unit length, x / sqrt(sum(x^2) + eps) (nGPT's and some ViTs' L2 QK-norm), where
RMSNorm scales them to unit root mean square, x / sqrt(mean(x^2) + eps): every normed head sqrt(H) times too short,
the scores H times too small. (The norm left in the input's dtype, no cast to float32, is no mutant here: in MLX
0.32.4 it conforms on all 12 cases in float16 and bfloat16, wide heads included, measured.)"""

import mlx.core as mx

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.norms import _attended, _normed_heads

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_qwen3_causal", "qk_norm_olmo2_causal", "qk_norm_wide_heads")


def _l2_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.astype(mx.float64 if input_dtype == mx.float64 else mx.float32)
    length = mx.sum(mx.square(hidden_states), axis=-1, keepdims=True)  # the bug: the sum, not the mean
    hidden_states = hidden_states * mx.rsqrt(length + eps)
    return weight * hidden_states.astype(input_dtype)


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_l2_norm, *args), causal)
