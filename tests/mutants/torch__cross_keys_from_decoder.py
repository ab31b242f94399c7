"""Cross-attention's keys projected from the decoder's x instead of the encoder's memory (the values still from the
memory): self-attention's keys left in place. Where T != S the scores do not meet the padding; where T == S it runs and
attends by the wrong keys."""

import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("cross_same_size", "cross_flag_same_size")


def _heads(x, memory, w_query, w_key, w_value, num_heads):
    x, memory = _t(x), _t(memory)
    H = w_query.shape[-1] // num_heads
    keys = _split_heads(x @ _t(w_key), num_heads, H)  # the bug: x, not memory
    return _split_heads(x @ _t(w_query), num_heads, H), keys, _split_heads(memory @ _t(w_value), num_heads, H)


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _heads(x, memory, w_query, w_key, w_value, num_heads)
    scores = (queries @ keys.mT / queries.shape[-1] ** 0.5).masked_fill(_t(padding)[:, None, None, :], float("-inf"))
    weights = scores.softmax(dim=-1)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _heads(x, memory, w_query, w_key, w_value, num_heads)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~_t(padding)[:, None, None, :])
    return _np(context.transpose(-3, -2).flatten(-2))
