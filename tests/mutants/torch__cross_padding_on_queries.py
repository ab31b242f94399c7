"""The encoder's padding laid over the queries, [B, 1, T, 1], where it belongs over the keys, [B, 1, 1, S]: a padded
memory position's query row hidden whole (zeros through SDPA), the padded keys seen by every other query. Only where
T == S does the shape fit."""

import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.cross import _cross_heads
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("cross_flag_same_size",)


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _cross_heads(x, memory, w_query, w_key, w_value, num_heads)
    attend = ~_t(padding)[:, None, :, None]  # the bug: over the queries
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attend)
    return _np(context.transpose(-3, -2).flatten(-2))
