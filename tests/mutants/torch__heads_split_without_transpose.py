"""Heads split with a reshape but no transpose: (.., T, N*H) read as (.., N, T, H) mixes tokens into heads (issue 58:
fuzz found it only with --op multi_head_attention and 60 cases while 29 ops shared one budget)."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("two_heads_binary", "four_heads_causal_batched")


def _split(t, n):
    return t.reshape(*t.shape[:-2], n, t.shape[-2], t.shape[-1] // n)


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _t(x)
    queries, keys, values = (_split(x @ _t(w), num_heads) for w in (w_query, w_key, w_value))
    scores = queries @ keys.mT
    if causal:
        scores = scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    heads = torch.softmax(scores / queries.shape[-1] ** 0.5, dim=-1) @ values
    merged = heads.transpose(-3, -2).reshape(*x.shape[:-1], w_query.shape[1])
    return {"heads": _np(heads), "context": _np(merged @ _t(w_out))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    queries, keys, values = (_split(x @ _t(w), num_heads) for w in (w_query, w_key, w_value))
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=causal))
