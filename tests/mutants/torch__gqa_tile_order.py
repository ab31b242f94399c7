"""K/V heads repeated in tile order (kv head n % K, torch's .repeat) instead of in place (n // (N/K))."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.heads import _grouped_split
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("gqa_two_kv_heads", "gqa_kv_heads_causal")  # with one K/V head (gqa_mqa_causal) both orders agree


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _t(x)
    queries, keys, values = _grouped_split(x, w_query, w_key, w_value, num_heads, num_kv_heads)
    tiles = (1,) * (keys.dim() - 3) + (num_heads // num_kv_heads, 1, 1)
    keys, values = keys.repeat(*tiles), values.repeat(*tiles)
    attn_scores = queries @ keys.mT
    if causal:
        attn_scores.masked_fill_(_causal_mask(x.shape[-2]), -torch.inf)
    return _np(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values)
