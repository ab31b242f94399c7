"""TensorFlow: RoPE scaled for long contexts from TensorFlow's own ops, as transformers' TF and keras-hub ports write
HF's formulas: the base and YaRN's correction range in Python floats from the config, the frequencies, angles and cos
and sin in float32 (float64 for a float64 model), cos and sin times the attention factor, then cast to the model's
dtype. TensorFlow has no RoPE kernel."""

import math

import tensorflow as tf

from .shared import _np, _t


def _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length):
    if rope_type == "dynamic":
        if length <= original_max_positions:  # up to the original length, RoPE's own base
            return theta
        factor = factor * length / original_max_positions - (factor - 1)
    return theta * factor ** (rotary_dim / (rotary_dim - 2))


def _yarn_ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide):
    def correction_dim(rotations):
        return rotary_dim * math.log(original_max_positions / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    high = high + 0.001 if low == high else high
    return tf.clip_by_value((tf.range(rotary_dim // 2, dtype=wide) - low) / (high - low), 0, 1)


def _scaled_table(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    exponents = tf.range(0, rotary_dim, 2, dtype=wide) / rotary_dim
    if rope_type != "yarn":
        base = _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length)
        return 1.0 / tf.pow(tf.constant(base, wide), exponents), 1.0
    extrapolation = 1.0 / tf.pow(tf.constant(theta, wide), exponents)
    ramp = _yarn_ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide)
    return extrapolation / factor * ramp + extrapolation * (1 - ramp), 0.1 * math.log(factor) + 1.0


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _scaled_table(*args, tf.float32)
    return {"frequencies": _np(inv_freq), "attention_factor": _np(tf.constant(attention_factor, tf.float32))}


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = _t(x)
    wide = tf.float64 if x.dtype == tf.float64 else tf.float32
    length = position + x.shape[-2]  # the last position + 1, as HF's dynamic update measures a sequence
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _scaled_table(*args, wide)
    angles = tf.cast(tf.range(position, length), wide)[:, None] * inv_freq[None, :]
    cos, sin = (tf.cast(f(angles) * attention_factor, x.dtype) for f in (tf.cos, tf.sin))
    turned, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if pairing == "interleaved":  # RoFormer's: [-x1, x0, -x3, x2, ..] and cos, sin repeated pairwise
        cos, sin = tf.repeat(cos, 2, axis=-1), tf.repeat(sin, 2, axis=-1)
        swapped = tf.reshape(tf.stack([-turned[..., 1::2], turned[..., ::2]], axis=-1), tf.shape(turned))
    else:
        cos, sin = tf.concat([cos, cos], axis=-1), tf.concat([sin, sin], axis=-1)
        first, second = tf.split(turned, 2, axis=-1)
        swapped = tf.concat([-second, first], axis=-1)
    return _np(tf.concat([turned * cos + swapped * sin, rest], axis=-1))
