"""T5's scores scaled by 1/sqrt(H), as a port through an attention op's default scale does: T5 folds the scale into
W_query's initialisation and scores q k^T as they are."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.cross import _buckets
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("t5_encoder_two_heads", "t5_decoder_causal", "t5_encoder_long")


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = _t(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    bias = F.embedding(_buckets(T, T, num_buckets, max_distance, bidirectional), _t(bias_table)).permute([2, 0, 1])
    scores = queries @ keys.mT / H**0.5 + bias  # the bug: the scale
    if causal:
        scores = scores.masked_fill(_causal_mask(T), -torch.inf)
    weights = scores.softmax(dim=-1)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}
