"""TensorFlow: what the families share: NumPy to tensors and back, batched matmul, the (masked) scaled softmax,
the causal mask, heads split.
"""

import functools
import math

import numpy as np
import tensorflow as tf


def _t(a):
    if tf.is_symbolic_tensor(a):  # traced (the compiled mode): the input already is the traced tensor
        return a
    return tf.constant(np.asarray(a))


def _np(t):
    if not tf.executing_eagerly():  # traced: the tensor itself goes on; modes.py makes it NumPy at the boundary
        return tf.convert_to_tensor(t)
    return t.numpy()


def _matmul(a, b):
    # tf.linalg.matmul needs rank >= 2 on both sides: one token is a [1, d_in] row.
    if a.shape.rank == 1:
        return tf.linalg.matmul(a[tf.newaxis], b)[0]
    return tf.linalg.matmul(a, b)


def _batched(fn):
    """One sequence [T, D] runs as a batch of one: the 4-D transposes and keras.ops want [B, T, ..]."""

    @functools.wraps(fn)
    def call(x, *args, **kwargs):
        out = fn(_t(x) if len(np.shape(x)) == 3 else _t(x)[tf.newaxis], *args, **kwargs)
        return out if len(np.shape(x)) == 3 else out[0]

    return call


def _scaled_softmax(attn_scores, keys):
    d_k = keys.shape[-1]
    return tf.nn.softmax(tf.math.divide(attn_scores, math.sqrt(d_k)), axis=-1)


def _masked_weights(attn_scores, keys, hidden):
    attn_scores = tf.where(hidden, tf.constant(-math.inf, attn_scores.dtype), attn_scores)  # True = hidden
    return _scaled_softmax(attn_scores, keys)


def _causal_mask(T):
    return tf.linalg.band_part(tf.ones([T, T]), -1, 0) == 0  # outside the lower band: the future


def _swap_tokens_and_heads(rank):  # (.., T, N, H) <-> (.., N, T, H): tf.transpose's perm names every axis
    return list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1]


def _split_last(t, n, head_dim):  # (.., T, n*H) -> (.., T, n, H): keras.ops.dot_product_attention's layout
    return tf.reshape(t, t.shape[:-1] + [n, head_dim])


def _split_heads(t, n, head_dim):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return tf.transpose(_split_last(t, n, head_dim), _swap_tokens_and_heads(len(t.shape) + 1))
