"""Gemma's (1 + weight) applied to a weight meant as the multiplier itself (Qwen3's and OLMo 2's `weight`): a Gemma
RMSNorm reused for a Qwen3 checkpoint. Weights near 1 become near 2, weights near 0 near 1."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.norms import _normed_heads
from attention_conformance.adapters.torch.shared import _causal_mask, _np

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_qwen3_causal", "qk_norm_gemma_offset_weight", "qk_norm_olmo2_causal")


def _gemma_rms_norm(x, weight, eps):  # Gemma3RMSNorm's forward
    output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    output = output * (1.0 + weight.float())  # the bug: the weight here is the multiplier
    return output.type_as(x)


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _normed_heads(_gemma_rms_norm, *args)
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(attn_scores.shape[-1]), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    context = (weights @ values).transpose(-3, -2).flatten(-2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}
