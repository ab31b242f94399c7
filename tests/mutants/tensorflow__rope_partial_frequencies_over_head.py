"""Partial RoPE whose frequencies count the head's width, theta ** (-2i / H), where GPT-NeoX and GPT-J count the
turned dims, theta ** (-2i / rotary_dim)."""

import tensorflow as tf

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("rope_partial_rotate_half",)


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _t(x)
    inv_freq = 1.0 / tf.pow(theta, tf.range(0, rotary_dim, 2, dtype=tf.float32) / x.shape[-1])  # the bug: / H
    angles = tf.cast(tf.range(position, position + x.shape[-2]), tf.float32)[:, None] * inv_freq[None, :]
    cos, sin = tf.cast(tf.cos(angles), x.dtype), tf.cast(tf.sin(angles), x.dtype)
    half = rotary_dim // 2
    first, second, rest = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return _np(tf.concat([first * cos - second * sin, first * sin + second * cos, rest], axis=-1))
