"""OLMo 2's norm over the whole projection where the case means Qwen3's per head: one root for all heads, so a head
whose queries are shorter than the others' stays shorter. The weight [H] is tiled over the heads to fit."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch import norms
from attention_conformance.adapters.torch.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_flag_qwen3_causal", "qk_norm_flag_gemma_offset_weight", "qk_norm_flag_wide_heads")


def _olmo(args):
    x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head = args
    if per_head:  # the bug: normed over all N*H dims, as OLMo 2 does
        norm_weight_q, norm_weight_k = (
            torch.as_tensor(w).repeat(num_heads).numpy() for w in (norm_weight_q, norm_weight_k)
        )
    return x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, False


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = _olmo((x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head))
    queries, keys, values = norms._normed_heads(norms._own_rms_norm, *args)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=causal)
    return {"queries": _np(queries), "context": _np(context.transpose(-3, -2).flatten(-2))}
