"""ALiBi's slopes in reverse head order: head 0 gets the gentlest slope where BLOOM gives it the steepest (a slope table
read back to front, or heads merged in the other order)."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.logits import _alibi_heads, _alibi_slopes
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("alibi_slopes_two_heads", "alibi_eight_heads_causal", "alibi_twelve_heads_causal", "alibi_long_sequence")


def _reversed_bias(num_heads, T, dtype):
    positions = torch.arange(T)
    slopes = _alibi_slopes(num_heads, dtype).flip(0)  # the bug
    return (slopes[:, None, None] * (positions - positions[:, None])).to(dtype)


def alibi_slopes(num_heads):
    return _np(_alibi_slopes(num_heads, torch.float32).flip(0))


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    queries, keys, values = _alibi_heads(x, w_query, w_key, w_value, num_heads)
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5 + _reversed_bias(num_heads, x.shape[-2], x.dtype)
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    queries, keys, values = _alibi_heads(x, w_query, w_key, w_value, num_heads)
    bias = _reversed_bias(num_heads, x.shape[-2], x.dtype)
    if causal:
        bias = bias.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=bias)
    return _np(context.transpose(-3, -2).flatten(-2))
