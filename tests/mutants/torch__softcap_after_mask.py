"""Soft-capping after the mask: a hidden key's -inf becomes -cap, and e^-cap of the row's probability leaks to it
(onnx#7867's bug in ONNX's reference Attention)."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("softcap_causal", "softcap_small_cap")


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = queries @ keys.mT / keys.shape[-1] ** 0.5
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    if cap:  # the bug: capped after the mask
        attn_scores = torch.tanh(attn_scores / cap) * cap
    weights = torch.softmax(attn_scores, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}
