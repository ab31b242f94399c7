"""PyTorch: flash-attention's two-sided window and padded queries, from torch's ops and through SDPA."""

import torch
import torch.nn.functional as F

from .shared import _causal_mask, _np, _split_heads, _t
from .varlen import _attend, _padded


def band_attention(x, w_query, w_key, w_value, left, right):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    # flash-attention's window_size=(left, right): key j hidden below i - left and above i + right, -1 no limit.
    i, j = torch.arange(x.shape[-2])[:, None], torch.arange(x.shape[-2])
    hidden = ((j < i - left) if left >= 0 else False) | ((j > i + right) if right >= 0 else False)
    attn_scores = (queries @ keys.mT).masked_fill(torch.as_tensor(hidden), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def _hidden(padding, causal):
    """[B, T, T], True = hidden: the padding's keys from every query, and the future if causal."""
    padding = _t(padding)
    return padding[:, None, :] | (_causal_mask(padding.shape[-1]) if causal else False)


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    x, ignored = _t(x), _t(padding)[..., None]
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_hidden(padding, causal), -torch.inf)
    # attention_ref's masked_fill: a left-padded causal row sees no key, and its softmax is 0/0 before it.
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1).masked_fill(ignored, 0)
    return {"weights": _np(weights), "context": _np((weights @ values).masked_fill(ignored, 0))}


def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~_hidden(padding, causal))
    return _np(torch.where(_t(padding)[..., None], 0, context))  # where, not a product: SDPA's empty rows are NaN


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    packed = F.scaled_dot_product_attention(queries, keys, values, attn_mask=_attend(cu_seqlens, causal))
    padded = _padded(queries, keys, values, cu_seqlens, causal)
    return {"packed": _np(packed.transpose(-3, -2).flatten(-2)), "padded": _np(padded.transpose(-3, -2).flatten(-2))}
