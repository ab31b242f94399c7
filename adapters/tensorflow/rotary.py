"""TensorFlow: rotary position embeddings from TensorFlow's own ops, interleaved as RoFormer's own code (bert4keras)
writes it and rotate_half as keras-hub's RotaryEmbedding; TensorFlow has no RoPE kernel."""

import math

import tensorflow as tf

from .shared import _np, _split_heads, _swap_tokens_and_heads, _t


def _frequencies(rotary_dim, theta, scaling, factor, dtype):
    inv_freq = 1.0 / tf.pow(tf.constant(theta, dtype), tf.range(0, rotary_dim, 2, dtype=dtype) / rotary_dim)
    if scaling == "linear":
        return inv_freq / factor
    if scaling == "llama3":  # Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original context 8192
        wavelength = 2 * math.pi / inv_freq
        smooth = (8192 / wavelength - 1) / (4 - 1)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        kept = tf.where(wavelength > 8192, inv_freq / factor, inv_freq)
        return tf.where((wavelength >= 8192 / 4) & (wavelength <= 8192), blended, kept)
    return inv_freq


def _rotate(t, positions, pairing, rotary_dim, theta=10000.0, scaling="none", factor=1.0):
    # Positions and angles in float32 whatever the model's dtype (float64 for a float64 one).
    wide = tf.float64 if t.dtype == tf.float64 else tf.float32
    angles = tf.cast(positions, wide)[:, None] * _frequencies(rotary_dim, theta, scaling, factor, wide)[None, :]
    cos, sin = tf.cast(tf.cos(angles), t.dtype), tf.cast(tf.sin(angles), t.dtype)
    turned, rest = t[..., :rotary_dim], t[..., rotary_dim:]
    if pairing == "interleaved":  # RoFormer's: [-x1, x0, -x3, x2, ..] and cos, sin repeated pairwise
        cos, sin = tf.repeat(cos, 2, axis=-1), tf.repeat(sin, 2, axis=-1)
        swapped = tf.reshape(tf.stack([-turned[..., 1::2], turned[..., ::2]], axis=-1), tf.shape(turned))
    else:
        cos, sin = tf.concat([cos, cos], axis=-1), tf.concat([sin, sin], axis=-1)
        first, second = tf.split(turned, 2, axis=-1)
        swapped = tf.concat([-second, first], axis=-1)
    return tf.concat([turned * cos + swapped * sin, rest], axis=-1)


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _t(x)
    positions = tf.range(position, position + x.shape[-2])
    return _np(_rotate(x, positions, pairing, rotary_dim, theta, scaling, factor))


def _rotary_context(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(tf.linalg.matmul(x, w), num_heads, H) for w in (w_query, w_key, w_value))
    queries = _rotate(queries, tf.range(T), pairing, rotary_dim)[..., start:, :]
    keys = _rotate(keys, tf.range(T), pairing, rotary_dim)
    p, j = tf.range(start, T)[:, None], tf.range(T)[None, :]  # query p at its absolute position
    scores = tf.linalg.matmul(queries, keys, transpose_b=True) / math.sqrt(H)
    weights = tf.nn.softmax(tf.where(j > p, tf.constant(-math.inf, scores.dtype), scores), axis=-1)
    context = tf.transpose(tf.linalg.matmul(weights, values), _swap_tokens_and_heads(len(x.shape) + 1))
    return _np(tf.reshape(context, tf.concat([tf.shape(context)[:-2], [num_heads * H]], axis=0)))


def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    return _rotary_context(_t(x), _t(w_query), _t(w_key), _t(w_value), num_heads, pairing, rotary_dim, start)


def _permuted(w, num_heads, rotary_dim, pairs):
    """In each head, turned columns (2i, 2i+1) to (i, i + R/2) (HF's Llama conversion), or back."""
    D = w.shape[0]
    heads = tf.reshape(w, [D, num_heads, -1])
    grouped = tf.reshape(heads[..., :rotary_dim], [D, num_heads] + ([-1, 2] if pairs else [2, -1]))
    turned = tf.reshape(tf.linalg.matrix_transpose(grouped), [D, num_heads, rotary_dim])
    return tf.reshape(tf.concat([turned, heads[..., rotary_dim:]], axis=-1), [D, -1])


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    x, w_query, w_key, w_value = _t(x), _t(w_query), _t(w_key), _t(w_value)
    converted = [_permuted(w, num_heads, rotary_dim, pairs=True) for w in (w_query, w_key)]
    restored = [_permuted(w, num_heads, rotary_dim, pairs=False) for w in converted]

    def context(wq, wk, pairing):
        return _rotary_context(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
