"""K/V heads repeated in tile order (mx.tile: kv head n % K) instead of in place (mx.repeat: n // (N/K))."""

import mlx.core as mx

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.shared import _causal_mask, _heads, _masked_weights, _mx, _np

EXPECTED = "caught"
MUST_FAIL = ("gqa_two_kv_heads", "gqa_kv_heads_causal")  # with one K/V head (gqa_mqa_causal) both orders agree


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    tiles = (1, num_heads // num_kv_heads, 1, 1)
    keys, values = (mx.tile(_heads(x @ _mx(w), num_kv_heads), tiles) for w in (w_key, w_value))
    attn_scores = queries @ keys.swapaxes(-1, -2)
    T = x.shape[-2]
    weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    )
    heads = weights @ values
    return _np(heads[0] if x.ndim == 2 else heads)
