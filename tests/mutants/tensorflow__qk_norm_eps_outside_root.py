"""eps beside the root, x / (sqrt(mean(x^2)) + eps), where RMSNorm puts it inside, x / sqrt(mean(x^2) + eps): the two
agree while eps is far below the mean square and part where a small projection meets a large eps (Keras' own
LayerNormalization and the RMSNorm paper's formula both take it inside)."""

import tensorflow as tf

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.norms import _attended, _normed_heads

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_large_eps",)


def _rms_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = tf.cast(hidden_states, tf.float64 if input_dtype == tf.float64 else tf.float32)
    rms = tf.sqrt(tf.reduce_mean(tf.square(hidden_states), axis=-1, keepdims=True))
    hidden_states = hidden_states / (rms + eps)  # the bug: eps outside the root
    return weight * tf.cast(hidden_states, input_dtype)


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_rms_norm, *args), causal)
