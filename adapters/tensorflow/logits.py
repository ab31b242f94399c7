"""TensorFlow: the scores before the softmax past the documents', soft-capped (Gemma 2's order) and with gpt-oss's
sinks (a sink column concatenated, softmaxed, then dropped); ALiBi's bias as BLOOM builds it, added to the scores and
as keras.ops.dot_product_attention's bias; a decoder with all of them; Keras's own scale."""

import math

import keras
import tensorflow as tf

from .rotary import _rotate
from .shared import _causal_mask, _np, _split_heads, _split_last, _swap_tokens_and_heads, _t


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = _t(x)
    Q, K, V = tf.linalg.matmul(x, _t(w_query)), tf.linalg.matmul(x, _t(w_key)), tf.linalg.matmul(x, _t(w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(K.shape[-1])
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        scores = tf.tanh(scores / cap) * cap
    if causal:
        scores = tf.where(_causal_mask(x.shape[-2]), tf.constant(-math.inf, scores.dtype), scores)
    weights = tf.nn.softmax(scores, axis=-1)
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, V))}


def _sink_softmax(scores, sinks, num_heads):
    """gpt-oss's: head n's sink a column concatenated to its scores, softmaxed with them, then dropped."""
    sink = tf.broadcast_to(tf.reshape(_t(sinks), [num_heads, 1, 1]), tf.concat([tf.shape(scores)[:-1], [1]], 0))
    return tf.nn.softmax(tf.concat([scores, sink], axis=-1), axis=-1)[..., :-1]


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    Q, K, V = (_split_heads(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(H)
    scores = tf.where(_t(mask)[:, tf.newaxis], tf.constant(-math.inf, scores.dtype), scores)  # True = hidden
    weights = _sink_softmax(scores, sinks, num_heads)
    context = tf.transpose(tf.linalg.matmul(weights, V), _swap_tokens_and_heads(4))
    return {"weights": _np(weights), "context": _np(tf.reshape(context, [x.shape[0], x.shape[1], -1]))}


def _alibi_slopes(num_heads, dtype):
    """BLOOM's build_alibi_tensor in TensorFlow: float32, float64 where the scores are."""
    wide = tf.float64 if dtype == tf.float64 else tf.float32
    closest = 2 ** math.floor(math.log2(num_heads))
    base = tf.constant(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=wide)
    slopes = tf.pow(base, tf.range(1, 1 + closest, dtype=wide))
    if closest != num_heads:
        extra_base = tf.constant(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=wide)
        slopes = tf.concat([slopes, tf.pow(extra_base, tf.range(1, 1 + 2 * (num_heads - closest), 2, dtype=wide))], 0)
    return slopes


def alibi_slopes(num_heads):
    return _np(_alibi_slopes(num_heads, tf.float32))


def _alibi_bias(num_heads, T, dtype, causal):
    """slope * (j - i), [N, T, T], in the slopes' precision, stored in the scores' dtype; -inf where causal hides."""
    slopes = _alibi_slopes(num_heads, dtype)
    positions = tf.range(T, dtype=slopes.dtype)
    bias = tf.cast(slopes[:, tf.newaxis, tf.newaxis] * (positions - positions[:, tf.newaxis]), dtype)
    return tf.where(_causal_mask(T), tf.constant(-math.inf, dtype), bias) if causal else bias


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    Q, K, V = (_split_heads(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(H) + _alibi_bias(
        num_heads, x.shape[1], x.dtype, False
    )
    if causal:
        scores = tf.where(_causal_mask(x.shape[1]), tf.constant(-math.inf, scores.dtype), scores)
    weights = tf.nn.softmax(scores, axis=-1)
    context = tf.transpose(tf.linalg.matmul(weights, V), _swap_tokens_and_heads(4))
    return {"weights": _np(weights), "context": _np(tf.reshape(context, [x.shape[0], x.shape[1], -1]))}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    Q, K, V = (_split_last(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    bias = _alibi_bias(num_heads, x.shape[1], x.dtype, causal)[tf.newaxis]  # [1, N, T, S], added to scaled scores
    context = keras.ops.dot_product_attention(Q, K, V, bias=bias)  # [B, T, N, H]
    return _np(tf.reshape(context, [x.shape[0], x.shape[1], -1]))


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = tf.range(T)
    Q = _rotate(_split_heads(tf.linalg.matmul(x, _t(w_query)), num_heads, H), positions, pairing, H)
    K = tf.repeat(
        _rotate(_split_heads(tf.linalg.matmul(x, _t(w_key)), num_kv_heads, H), positions, pairing, H), group, 1
    )
    V = tf.repeat(_split_heads(tf.linalg.matmul(x, _t(w_value)), num_kv_heads, H), group, axis=1)  # each head in place
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(H)
    if cap:
        scores = tf.tanh(scores / cap) * cap
    i, j = positions[:, tf.newaxis], positions[tf.newaxis, :]
    scores = tf.where((j > i) | (j <= i - window), tf.constant(-math.inf, scores.dtype), scores)
    weights = _sink_softmax(scores, sinks, num_heads)
    context = tf.transpose(tf.linalg.matmul(weights, V), _swap_tokens_and_heads(4))
    return _np(tf.reshape(context, [x.shape[0], T, -1]))


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    x = _t(x)  # keras.ops.dot_product_attention takes [B, T, N, H]: one head
    Q, K, V = (_split_last(tf.linalg.matmul(x, _t(w)), 1, w.shape[-1]) for w in (w_query, w_key, w_value))
    return _np(keras.ops.dot_product_attention(Q, K, V, scale=softmax_scale, is_causal=causal)[..., 0, :])
