"""MLX: cross-attention from mlx.core's ops (queries from the decoder, keys and values from the memory, its padding
hidden) and through mx.fast.scaled_dot_product_attention's boolean mask, T and S apart; T5's relative position bias as
HF's T5 computes it (the bucket's log in float32, truncated), on unscaled scores."""

import math

import mlx.core as mx

from .shared import _causal_mask, _heads, _mx, _np, _split_heads


def _merged(heads):  # (.., N, T, H) -> (.., T, N*H)
    context = heads.swapaxes(-3, -2)
    return context.reshape(*context.shape[:-2], -1)


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    x, memory = _mx(x), _mx(memory)
    queries = _split_heads(x @ _mx(w_query), num_heads)
    keys, values = (_split_heads(memory @ _mx(w), num_heads) for w in (w_key, w_value))
    scores = queries @ keys.swapaxes(-1, -2) / queries.shape[-1] ** 0.5
    weights = mx.softmax(mx.where(_mx(padding)[:, None, None, :], -mx.inf, scores), axis=-1)  # every query
    return {"weights": _np(weights), "context": _np(_merged(weights @ values))}


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    x, memory = _mx(x), _mx(memory)
    queries = _heads(x @ _mx(w_query), num_heads)
    keys, values = (_heads(memory @ _mx(w), num_heads) for w in (w_key, w_value))
    attend = ~_mx(padding)[:, None, None, :]  # a boolean mask here is True = attend, [B, 1, 1, S]
    context = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=queries.shape[-1] ** -0.5, mask=attend)
    return _np(_merged(context))


def _buckets(query_length, key_length, num_buckets, max_distance, bidirectional):
    """HF's _relative_position_bucket in mlx.core: key minus query, the log in float32, truncated."""
    relative_position = mx.arange(key_length)[None, :] - mx.arange(query_length)[:, None]
    buckets = mx.zeros(relative_position.shape, dtype=mx.int32)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).astype(mx.int32) * num_buckets
        relative_position = mx.abs(relative_position)
    else:
        relative_position = -mx.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    large = max_exact + (
        mx.log(relative_position.astype(mx.float32) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).astype(mx.int32)
    large = mx.minimum(large, num_buckets - 1)
    return buckets + mx.where(relative_position < max_exact, relative_position, large)


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    return _np(_buckets(query_length, key_length, num_buckets, max_distance, bidirectional))


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = _mx(x)
    T = x.shape[-2]
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    bias = _mx(bias_table)[_buckets(T, T, num_buckets, max_distance, bidirectional)]  # [T, S, N]
    scores = queries @ keys.swapaxes(-1, -2) + mx.moveaxis(bias, -1, 0)  # T5: no 1/sqrt(H)
    if causal:
        scores = mx.where(_causal_mask(T, T), -mx.inf, scores)
    weights = mx.softmax(scores, axis=-1)
    return {"weights": _np(weights), "context": _np(_merged(weights @ values))}
