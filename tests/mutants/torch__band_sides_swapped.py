"""flash-attention's window_size=(left, right) read as (right, left): the keys after the query and the keys before it
trade places. A window as wide on both sides is right."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("band_future_only", "band_unbounded_left", "band_long_sequence")


def band_attention(x, w_query, w_key, w_value, left, right):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    left, right = right, left  # the bug
    i, j = torch.arange(x.shape[-2])[:, None], torch.arange(x.shape[-2])
    hidden = ((j < i - left) if left >= 0 else False) | ((j > i + right) if right >= 0 else False)
    attn_scores = (queries @ keys.mT).masked_fill(torch.as_tensor(hidden), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}
