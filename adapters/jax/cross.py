"""JAX: cross-attention written out (queries from the decoder, keys and values from the memory, its padding hidden)
and through jax.nn.dot_product_attention's bool mask, T and S apart; T5's relative position bias as HF's T5 computes
it (the bucket's log in float32, truncated), on unscaled scores."""

import math

import jax
import jax.numpy as jnp

from .shared import _causal_mask, _compiled, _split_heads, _split_last


def _cross(x, memory, w_query, w_key, w_value, num_heads, split):
    x, memory = jnp.asarray(x), jnp.asarray(memory)
    H = w_query.shape[-1] // num_heads
    return split(x @ jnp.asarray(w_query), num_heads, H), *(
        split(memory @ jnp.asarray(w), num_heads, H) for w in (w_key, w_value)
    )


@_compiled("num_heads")
def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _cross(x, memory, w_query, w_key, w_value, num_heads, _split_heads)
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(queries.shape[-1])
    weights = jax.nn.softmax(jnp.where(padding[:, None, None, :], -jnp.inf, scores), axis=-1)  # every query
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}


@_compiled("num_heads", eager_float16=True)
def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _cross(x, memory, w_query, w_key, w_value, num_heads, _split_last)  # [B, T|S, N, H]
    attend = ~jnp.asarray(padding)[:, None, None, :]  # [B, 1, T, S] broadcast: True = take part
    context = jax.nn.dot_product_attention(queries, keys, values, mask=attend)
    return context.reshape(*context.shape[:-2], -1)


def _buckets(query_length, key_length, num_buckets, max_distance, bidirectional):
    """HF's _relative_position_bucket in jnp: key minus query, the log in float32, truncated."""
    relative_position = jnp.arange(key_length)[None, :] - jnp.arange(query_length)[:, None]
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).astype(jnp.int32) * num_buckets
        relative_position = jnp.abs(relative_position)
    else:
        relative_position = -jnp.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    large = max_exact + (
        jnp.log(relative_position.astype(jnp.float32) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).astype(jnp.int32)
    large = jnp.minimum(large, num_buckets - 1)
    return buckets + jnp.where(relative_position < max_exact, relative_position, large)


@_compiled("query_length", "key_length", "num_buckets", "max_distance", "bidirectional")
def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    return _buckets(query_length, key_length, num_buckets, max_distance, bidirectional)


@_compiled("num_heads", "num_buckets", "max_distance", "bidirectional", "causal")
def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = jnp.asarray(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    bias = jnp.asarray(bias_table)[_buckets(T, T, num_buckets, max_distance, bidirectional)]  # [T, S, N]
    scores = queries @ jnp.swapaxes(keys, -1, -2) + jnp.moveaxis(bias, -1, 0)  # T5: no 1/sqrt(H)
    if causal:
        scores = jnp.where(_causal_mask(T), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}
