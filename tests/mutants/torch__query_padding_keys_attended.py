"""Padded queries handled by zeroing their rows alone: the padding is never hidden as a key, so every real query
attends to it. A batch with no padding is right."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("query_padding_both_ends", "query_padding_causal", "query_padding_three_rows")


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    x, ignored = _t(x), _t(padding)[..., None]
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = queries @ keys.mT  # the bug: no key hidden
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1).masked_fill(ignored, 0)
    return {"weights": _np(weights), "context": _np((weights @ values).masked_fill(ignored, 0))}
