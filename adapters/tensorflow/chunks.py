"""TensorFlow: Llama 4's attention from TensorFlow's ops (the chunked mask on the causal one, the NoPE layers' query
temperature, the weightless L2Norm after RoPE), and the chunks through keras.ops.dot_product_attention's mask."""

import math

import keras
import tensorflow as tf

from .bands import _projected, _zeroed
from .rotary import _rotate
from .shared import _masked_weights, _np, _split_heads, _swap_tokens_and_heads, _t


def _wide(t):  # the norm's and the temperature's dtype: float32 at least, as transformers computes them
    return tf.float64 if t.dtype == tf.float64 else tf.float32


def _chunked_hidden(padding, chunk):
    """[B, T, T], True = hidden: causal within chunks counted from each row's first real token, and the padding."""
    T = padding.shape[-1]
    first = tf.argmax(tf.cast(tf.logical_not(padding), tf.int32), axis=-1, output_type=tf.int32)[:, None, None]
    i, j = tf.range(T)[:, None] - first, tf.range(T)[None, :] - first
    return (j > i) | (tf.math.floordiv(j, chunk) != tf.math.floordiv(i, chunk)) | padding[:, tf.newaxis, :]


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = _t(padding)
    scores = tf.linalg.matmul(queries, keys, transpose_b=True)
    weights = _zeroed(padding, _masked_weights(scores, keys, _chunked_hidden(padding, chunk)))
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, values))}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    Q, K, V = (t[..., tf.newaxis, :] for t in _projected(x, w_query, w_key, w_value))  # [B, T, N=1, H]
    padding = _t(padding)
    attend = tf.logical_not(_chunked_hidden(padding, chunk))[:, tf.newaxis]  # Keras: True = the key takes part
    return _np(_zeroed(padding, keras.ops.dot_product_attention(Q, K, V, mask=attend)[..., 0, :]))


def _l2_norm(t, eps):  # Llama4TextL2Norm: x * rsqrt(mean(x^2) + eps), no weight, cast back
    wide = tf.cast(t, _wide(t))
    return tf.cast(wide * tf.math.rsqrt(tf.reduce_mean(tf.square(wide), axis=-1, keepdims=True) + eps), t.dtype)


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    queries = _split_heads(tf.linalg.matmul(x[..., start:, :], _t(w_query)), num_heads, H)
    keys = _split_heads(tf.linalg.matmul(x, _t(w_key)), num_kv_heads, H)
    values = tf.repeat(_split_heads(tf.linalg.matmul(x, _t(w_value)), num_kv_heads, H), group, axis=-3)
    positions = tf.range(T)  # the queries' are start..T-1
    if use_rope:
        queries = _l2_norm(_rotate(queries, positions[start:], "interleaved", H), eps)
        keys = _l2_norm(_rotate(keys, positions, "interleaved", H), eps)
    elif attn_scale:
        p = tf.cast(positions[start:], _wide(queries))
        scales = tf.math.log(tf.math.floor((p + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
        queries = tf.cast(tf.cast(queries, scales.dtype) * scales[:, tf.newaxis], queries.dtype)
    i, j = positions[start:, tf.newaxis], positions[tf.newaxis, :]
    hidden = (j > i) | ((j // chunk != i // chunk) if use_rope and chunk else tf.zeros_like(j > i))
    scores = tf.linalg.matmul(queries, tf.repeat(keys, group, axis=-3), transpose_b=True) / math.sqrt(H)
    weights = tf.nn.softmax(tf.where(hidden, tf.constant(-math.inf, scores.dtype), scores), axis=-1)
    context = tf.transpose(tf.linalg.matmul(weights, values), _swap_tokens_and_heads(len(values.shape)))
    return {"queries": _np(queries), "context": _np(tf.reshape(context, [*context.shape[:-2], num_heads * H]))}
