"""A window of W read as W + 1 keys (positions p-W..p, the Mistral paper's wording): one key too many."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("window_three", "window_one", "window_decode_one_token", "window_decode_chunk", "window_long_sequence")


def window_attention(x, w_query, w_key, w_value, window, start):
    x = _t(x)
    keys, values = x @ _t(w_key), x @ _t(w_value)
    queries = x[..., start:, :] @ _t(w_query)
    p, j = torch.arange(start, x.shape[-2])[:, None], torch.arange(x.shape[-2])
    attn_scores = (queries @ keys.mT).masked_fill((j > p) | (j < p - window), -torch.inf)  # the bug: < for <=
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}
