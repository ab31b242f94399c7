"""Heads merged back with a reshape but no transpose: (B, N, T, H) read as (B, T, N*H) interleaves tokens."""

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("two_heads_binary", "four_heads_causal_batched")


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    heads = base.multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal)["heads"]
    merged = _t(heads).reshape(*x.shape[:-1], w_query.shape[1])
    return {"heads": heads, "context": _np(merged @ _t(w_out))}
