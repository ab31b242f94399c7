"""Positions that run on across the packed row (Megatron-LM's GPT dataset without reset_position_ids), the document
mask kept. RoPE's scores see distances only, so weights and context stay right within rounding: the rotated queries
of every document after the first are wrong, which only `queries` shows (conventions.packed_documents)."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.rotary import _rotate
from attention_conformance.adapters.torch.shared import _np, _split_heads, _t
from attention_conformance.adapters.torch.varlen import _attend

EXPECTED = "caught"
MUST_FAIL = ("varlen_positions_restart", "varlen_three_documents_causal")


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    x = _t(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    positions = torch.arange(T)  # the bug: 0..T-1 across the row
    queries, keys = _rotate(queries, positions, "rotate_half", H), _rotate(keys, positions, "rotate_half", H)
    attn_scores = (queries @ keys.mT / H**0.5).masked_fill(~_attend(cu_seqlens, causal), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    context = (weights @ values).transpose(-3, -2).flatten(-2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}
