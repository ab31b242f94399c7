"""The padding's rows zeroed by a product with the real tokens' mask, not by where: a causal row padded on the left
sees no key, the softmax's 0/0 is NaN there, and NaN * 0 stays NaN. Every row that sees a key is right."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.bands import _hidden
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("query_padding_causal", "query_padding_three_rows")


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    x, real = _t(x), ~_t(padding)[..., None]
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_hidden(padding, causal), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) * real  # the bug
    return {"weights": _np(weights), "context": _np((weights @ values) * real)}
