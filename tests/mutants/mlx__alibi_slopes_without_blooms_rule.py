"""ALiBi's slopes as 2^(-8k/N) for every head count (the paper's power-of-two formula applied to 12 heads), where
BLOOM's rule takes the slopes of the power of two below and every other slope of the one above: right for 1, 2, 4 and
8 heads, wrong for the others."""

import math

import mlx.core as mx

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.shared import _causal_mask, _mx, _np, _split_heads

EXPECTED = "caught"
MUST_FAIL = ("alibi_slopes_three_heads", "alibi_slopes_twelve_heads", "alibi_twelve_heads_causal")


def _slopes(num_heads, dtype):
    wide = mx.float64 if dtype == mx.float64 else mx.float32
    return mx.power(mx.array(2.0, dtype=wide), -8 * mx.arange(1, num_heads + 1).astype(wide) / num_heads)  # the bug


def alibi_slopes(num_heads):
    return _np(_slopes(num_heads, mx.float32))


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _mx(x)
    T = x.shape[-2]
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    slopes, positions = _slopes(num_heads, x.dtype), mx.arange(T)
    bias = (slopes[:, None, None] * (positions - positions[:, None]).astype(slopes.dtype)).astype(x.dtype)
    scores = queries @ keys.swapaxes(-1, -2) / math.sqrt(queries.shape[-1]) + bias
    if causal:
        scores = mx.where(_causal_mask(T, T), -mx.inf, scores)
    weights = mx.softmax(scores, axis=-1)
    context = (weights @ values).swapaxes(-3, -2)
    return {"weights": _np(weights), "context": _np(context.reshape(*context.shape[:-2], -1))}
