"""JAX: the scores before the softmax past the documents', soft-capped (Gemma 2's order, as its JAX code) and with
gpt-oss's sinks (a sink column concatenated, softmaxed, then dropped); ALiBi's bias as BLOOM's JAX code builds it,
added to the scores and as jax.nn.dot_product_attention's bias; a decoder with all of them;
jax.nn.dot_product_attention's own scale and key lengths."""

import math

import jax
import jax.numpy as jnp

from .rotary import _rotate
from .shared import _causal_mask, _compiled, _split_heads, _split_last


@_compiled("cap", "causal")
def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(keys.shape[-1])
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        scores = jnp.tanh(scores / cap) * cap
    if causal:
        scores = jnp.where(_causal_mask(x.shape[-2]), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    return {"weights": weights, "context": weights @ values}


def _sink_softmax(scores, sinks, num_heads):
    """gpt-oss's: head n's sink a column concatenated to its scores, softmaxed with them, then dropped."""
    sink = jnp.broadcast_to(jnp.asarray(sinks).reshape(num_heads, 1, 1), scores.shape[:-1] + (1,))
    return jax.nn.softmax(jnp.concatenate([scores, sink], axis=-1), axis=-1)[..., :-1]


@_compiled("num_heads")
def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    scores = jnp.where(mask[:, None], -jnp.inf, queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H))
    weights = _sink_softmax(scores, sinks, num_heads)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}


def _alibi_slopes(num_heads, dtype):
    """BLOOM's build_alibi_tensor (its Flax port's jnp.power): float32, float64 where the scores are."""
    wide = jnp.float64 if dtype == jnp.float64 else jnp.float32
    closest = 2 ** math.floor(math.log2(num_heads))
    base = jnp.array(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=wide)
    slopes = jnp.power(base, jnp.arange(1, 1 + closest, dtype=jnp.int32))
    if closest != num_heads:
        extra_base = jnp.array(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=wide)
        extra_powers = jnp.arange(1, 1 + 2 * (num_heads - closest), 2, dtype=jnp.int32)
        slopes = jnp.concatenate([slopes, jnp.power(extra_base, extra_powers)])
    return slopes


@_compiled("num_heads")
def alibi_slopes(num_heads):
    return _alibi_slopes(num_heads, jnp.float32)


def _alibi_bias(num_heads, T, dtype):
    """slope * (j - i), [N, T, T], in the slopes' precision, stored in the scores' dtype."""
    positions = jnp.arange(T)
    return (_alibi_slopes(num_heads, dtype)[:, None, None] * (positions - positions[:, None])).astype(dtype)


@_compiled("num_heads", "causal")
def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H) + _alibi_bias(num_heads, x.shape[-2], x.dtype)
    if causal:
        scores = jnp.where(_causal_mask(x.shape[-2]), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}


@_compiled("num_heads", "causal", eager_float16=True)
def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_last(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    bias = _alibi_bias(num_heads, x.shape[-2], x.dtype)[None]  # [1, N, T, S], added to the scaled scores
    context = jax.nn.dot_product_attention(queries, keys, values, bias=bias, is_causal=causal)  # (.., T, N, H)
    return context.reshape(*context.shape[:-2], -1)


@_compiled("num_heads", "num_kv_heads", "pairing", "window", "cap")
def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = jnp.asarray(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = jnp.arange(T)
    queries = _rotate(_split_heads(x @ jnp.asarray(w_query), num_heads, H), positions, pairing, H)
    keys = jnp.repeat(_rotate(_split_heads(x @ jnp.asarray(w_key), num_kv_heads, H), positions, pairing, H), group, -3)
    values = jnp.repeat(_split_heads(x @ jnp.asarray(w_value), num_kv_heads, H), group, axis=-3)  # each head in place
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H)
    if cap:
        scores = jnp.tanh(scores / cap) * cap
    i, j = positions[:, None], positions
    scores = jnp.where((j > i) | (j <= i - window), -jnp.inf, scores)
    weights = _sink_softmax(scores, sinks, num_heads)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return context.reshape(*context.shape[:-2], -1)


@_compiled("softmax_scale", "causal", eager_float16=True)
def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    x = jnp.asarray(x)  # jax.nn.dot_product_attention takes [B, T, N, H]: one head
    q, k, v = (_split_last(x @ jnp.asarray(w), 1, w.shape[-1]) for w in (w_query, w_key, w_value))
    return jax.nn.dot_product_attention(q, k, v, scale=softmax_scale, is_causal=causal)[..., 0, :]


@_compiled(eager_float16=True)
def key_padding_flag(x, w_query, w_key, w_value, padding):
    x = jnp.asarray(x)
    q, k, v = (_split_last(x @ jnp.asarray(w), 1, w.shape[-1]) for w in (w_query, w_key, w_value))
    lengths = jnp.sum(~jnp.asarray(padding), axis=-1, dtype=jnp.int32)  # the padding trails: the real keys' count
    return jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths)[..., 0, :]
