"""gpt-oss's sinks dropped: a plain softmax over the keys, every row's weights summing to 1 (a port that loads the
model but never reads its `sinks` tensor)."""

import math

import tensorflow as tf

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _np, _split_heads, _swap_tokens_and_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("sink_two_heads", "sink_dominant", "sink_one_query")


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    Q, K, V = (_split_heads(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True) / math.sqrt(H)
    weights = tf.nn.softmax(tf.where(_t(mask)[:, tf.newaxis], tf.constant(-math.inf, scores.dtype), scores))
    weights = tf.where(tf.math.is_nan(weights), tf.zeros_like(weights), weights)  # the bug: no sink at all
    context = tf.transpose(tf.linalg.matmul(weights, V), _swap_tokens_and_heads(4))
    return {"weights": _np(weights), "context": _np(tf.reshape(context, [x.shape[0], x.shape[1], -1]))}
