"""Gemma's (1 + weight) applied to a weight meant as the multiplier itself (Qwen3's and OLMo 2's `weight`): a Gemma
RMSNorm reused for a Qwen3 checkpoint. Weights near 1 become near 2, weights near 0 near 1."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.norms import _attended, _normed_heads

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_qwen3_causal", "qk_norm_gemma_offset_weight", "qk_norm_olmo2_causal")


def _gemma_rms_norm(x, weight, eps):  # Gemma3RMSNorm's forward
    output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    output = output * (1.0 + weight.float())  # the bug: the weight here is the multiplier
    return output.type_as(x)


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_gemma_rms_norm, *args), causal)
