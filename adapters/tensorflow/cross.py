"""TensorFlow: cross-attention written out (queries from the decoder, keys and values from the memory, its padding
hidden) and through keras.layers.MultiHeadAttention(query, value, key) with value_mask; T5's relative position bias as
HF's TF T5 computes it (the bucket's log in float32, cast to int32), on unscaled scores."""

import functools
import math

import keras
import tensorflow as tf

from .shared import _causal_mask, _np, _split_heads, _swap_tokens_and_heads, _t


def _merged(heads):  # (B, N, T, H) -> (B, T, N*H)
    context = tf.transpose(heads, _swap_tokens_and_heads(4))
    return tf.reshape(context, tf.concat([tf.shape(context)[:-2], [-1]], 0))


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    x, memory = _t(x), _t(memory)
    H = w_query.shape[-1] // num_heads
    Q = _split_heads(tf.linalg.matmul(x, _t(w_query)), num_heads, H)
    K, V = (_split_heads(tf.linalg.matmul(memory, _t(w)), num_heads, H) for w in (w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(H)
    hidden = _t(padding)[:, tf.newaxis, tf.newaxis, :]  # [B, 1, 1, S]: every query
    weights = tf.nn.softmax(tf.where(hidden, tf.constant(-math.inf, scores.dtype), scores), axis=-1)
    return {"weights": _np(weights), "context": _np(_merged(tf.linalg.matmul(weights, V)))}


@functools.cache
def _cross_layer(d_in, d_memory, num_heads, head_dim, dtype):
    """keras.layers.MultiHeadAttention without biases, its output projection N*H wide (set to the identity below),
    built once per shape and dtype."""
    layer = keras.layers.MultiHeadAttention(
        num_heads, key_dim=head_dim, use_bias=False, output_shape=num_heads * head_dim, dtype=dtype
    )
    layer.build((None, None, d_in), (None, None, d_memory), (None, None, d_memory))
    return layer


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    D, D_memory, H = x.shape[-1], memory.shape[-1], w_query.shape[-1] // num_heads
    layer = _cross_layer(D, D_memory, num_heads, H, w_query.dtype.name)
    kernels = {  # EinsumDense kernels [D, N, H]; the output [N, H, N*H] the identity, so the heads come back merged
        "query/kernel": tf.reshape(w_query, [D, num_heads, H]),
        "key/kernel": tf.reshape(w_key, [D_memory, num_heads, H]),
        "value/kernel": tf.reshape(w_value, [D_memory, num_heads, H]),
        "attention_output/kernel": tf.reshape(tf.eye(num_heads * H, dtype=w_query.dtype), [num_heads, H, -1]),
    }
    for variable in layer.weights:
        variable.assign(kernels[variable.path.split("/", 1)[1]])
    memory = _t(memory)
    # Keras orders (query, value, key); value_mask [B, S]: True = a real token, the suite's opposite
    return _np(layer(_t(x), memory, memory, value_mask=tf.logical_not(_t(padding))))


def _buckets(query_length, key_length, num_buckets, max_distance, bidirectional):
    """HF's TF T5 _relative_position_bucket: key minus query, the log in float32, cast to int32."""
    relative_position = tf.range(key_length)[tf.newaxis, :] - tf.range(query_length)[:, tf.newaxis]
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += tf.cast(tf.math.greater(relative_position, 0), tf.int32) * num_buckets
        relative_position = tf.math.abs(relative_position)
    else:
        relative_position = -tf.math.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = tf.math.less(relative_position, max_exact)
    large = max_exact + tf.cast(
        tf.math.log(tf.cast(relative_position, tf.float32) / tf.cast(max_exact, tf.float32))
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact),
        dtype=tf.int32,
    )
    large = tf.math.minimum(large, num_buckets - 1)
    return buckets + tf.where(is_small, relative_position, large)


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    return _np(_buckets(query_length, key_length, num_buckets, max_distance, bidirectional))


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = _t(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    Q, K, V = (_split_heads(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    bias = tf.gather(_t(bias_table), _buckets(T, T, num_buckets, max_distance, bidirectional))  # [T, S, N]
    scores = tf.linalg.matmul(Q, K, transpose_b=True) + tf.transpose(bias, [2, 0, 1])  # T5: no 1/sqrt(H)
    if causal:
        scores = tf.where(_causal_mask(T), tf.constant(-math.inf, scores.dtype), scores)
    weights = tf.nn.softmax(scores, axis=-1)
    return {"weights": _np(weights), "context": _np(_merged(tf.linalg.matmul(weights, V)))}
