"""Llama 4's chunks counted from index 0 of a left-padded row (transformers' _legacy_chunked_overlay, "do not correctly
account for left padding tokens"), where they start at its first real token. Without padding the two agree."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = (
    "chunked_left_padded",
    "chunked_long_sequence",
    "chunked_flag_left_padded",
    "chunked_flag_long_sequence",
)


def _hidden(padding, chunk):
    padding = _t(padding)
    i, j = torch.arange(padding.shape[-1])[:, None], torch.arange(padding.shape[-1])
    return (j > i) | (j // chunk != i // chunk) | padding[:, None, :]  # the bug: no left_padding offset


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    x, rows = _t(x), _t(padding)[..., None]
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_hidden(padding, chunk), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1).masked_fill(rows, 0)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~_hidden(padding, chunk))
    return _np(torch.where(_t(padding)[..., None], 0, context))
