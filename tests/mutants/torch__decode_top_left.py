"""Decoding with the causal mask aligned top-left: the first new query sees only key 0, not the cache."""

import torch

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("decode_one_token", "decode_chunk")


def decode_attention(x, w_query, w_key, w_value, start):
    stepwise = base.decode_attention(x, w_query, w_key, w_value, start)["stepwise"]
    x = _t(x)
    keys, values, queries = x @ _t(w_key), x @ _t(w_value), x[..., start:, :] @ _t(w_query)
    top_left = torch.triu(torch.ones(queries.shape[-2], keys.shape[-2], dtype=torch.bool), diagonal=1)
    weights = torch.softmax((queries @ keys.mT).masked_fill(top_left, -torch.inf) / keys.shape[-1] ** 0.5, dim=-1)
    return {"context": _np(weights @ values), "stepwise": stepwise}
