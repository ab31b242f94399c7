"""TensorFlow: QK-norm (spec conventions.qk_norm) as HF's Qwen3RMSNorm writes it, in TensorFlow's ops
(float32 at least, x * rsqrt(mean(x^2) + eps), cast back, times the weight), per head or over the whole projection,
before keras-hub's rotate_half RoPE; and through Keras' own RMSNorm, keras.ops.rms_normalization (what
keras.layers.RMSNormalization.call runs), into keras.ops.dot_product_attention.

Keras 3.15.1's rms_normalization (keras/src/ops/nn.py, _rms_normalization): "compute_dtype =
backend.result_type(x.dtype, "float32")" (float32 for half precision, float64 stays float64), "rrms =
backend.math.rsqrt(backend.numpy.mean(backend.numpy.square(x), axis=axis, keepdims=True) + epsilon)" (eps inside the
root), "outputs = backend.numpy.multiply(outputs, scale)" in that dtype, then "backend.cast(outputs,
original_dtype)": the weight multiplied before the cast (Gemma's and OLMo 2's order). The op is called rather than
the layer: the layer holds its scale as a variable of its own dtype policy (float32 unless told) and autocasts its
input to it, where the op takes the given weight and the input's dtype as they are."""

import math

import keras
import tensorflow as tf

from .rotary import _rotate
from .shared import _causal_mask, _np, _split_heads, _swap_tokens_and_heads, _t


def _rms_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = tf.cast(hidden_states, tf.float64 if input_dtype == tf.float64 else tf.float32)
    variance = tf.reduce_mean(tf.square(hidden_states), axis=-1, keepdims=True)
    hidden_states = hidden_states * tf.math.rsqrt(variance + eps)
    return weight * tf.cast(hidden_states, input_dtype)


def _own_rms_norm(hidden_states, weight, eps):
    return keras.ops.rms_normalization(hidden_states, scale=weight, axis=-1, epsilon=eps)


def _normed_heads(norm, x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head):
    """[B, N, T, H] queries, keys (normed, rotated) and values."""
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (tf.linalg.matmul(x, _t(w)) for w in (w_query, w_key, w_value))
    weight_q, weight_k = _t(norm_weight_q), _t(norm_weight_k)
    if per_head:  # Qwen3, Gemma 3: the projection viewed as heads, each head's H dims normed
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
    else:  # OLMo 2: the whole projection normed, then split
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
    positions = tf.range(x.shape[-2])
    queries, keys = (_rotate(t, positions, "rotate_half", H) for t in (queries, keys))
    return queries, keys, _split_heads(values, num_heads, H)


def _attended(queries, keys, values, causal):
    """The textbook attention of normed heads: {"queries", "weights", "context"} (the wrong adapters share it too)."""
    scores = tf.linalg.matmul(queries, keys, transpose_b=True) / math.sqrt(queries.shape[-1])
    if causal:
        scores = tf.where(_causal_mask(scores.shape[-1]), tf.constant(-math.inf, scores.dtype), scores)
    weights = tf.nn.softmax(scores, axis=-1)
    context = tf.transpose(tf.linalg.matmul(weights, values), _swap_tokens_and_heads(4))
    merged = tf.reshape(context, context.shape[:-2].as_list() + [-1])
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(merged)}


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_rms_norm, *args), causal)


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _normed_heads(_own_rms_norm, *args)
    swap = _swap_tokens_and_heads(4)  # keras.ops.dot_product_attention takes [B, T, N, H]
    Q, K, V = (tf.transpose(t, swap) for t in (queries, keys, values))
    context = keras.ops.dot_product_attention(Q, K, V, is_causal=bool(causal))
    return {"queries": _np(queries), "context": _np(tf.reshape(context, context.shape[:-2].as_list() + [-1]))}
