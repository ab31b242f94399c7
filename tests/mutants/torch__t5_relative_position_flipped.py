"""T5's relative position taken as query minus key (i - j) where T5 takes memory_position - context_position (j - i):
the encoder's keys before and after a query trade buckets, and the decoder's earlier keys all fall in bucket 0."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.cross import _relative_position_bucket
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("t5_buckets_encoder", "t5_buckets_decoder", "t5_encoder_two_heads", "t5_decoder_causal")


def _flipped(query_length, key_length, num_buckets, max_distance, bidirectional):
    context_position = torch.arange(query_length)[:, None]
    memory_position = torch.arange(key_length)[None, :]
    relative_position = context_position - memory_position  # the bug
    return _relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance)


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    return _np(_flipped(query_length, key_length, num_buckets, max_distance, bidirectional))


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = _t(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    bias = F.embedding(_flipped(T, T, num_buckets, max_distance, bidirectional), _t(bias_table)).permute([2, 0, 1])
    scores = queries @ keys.mT + bias
    if causal:
        scores = scores.masked_fill(_causal_mask(T), -torch.inf)
    weights = scores.float().softmax(dim=-1).type_as(scores)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}
