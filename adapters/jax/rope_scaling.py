"""JAX: RoPE scaled for long contexts from jax.numpy, as Flax and MaxText ports write it: the base and YaRN's
correction range in Python floats from the config, the frequencies, angles and cos and sin in float32 (float64 for a
float64 model), cos and sin times the attention factor, then cast to the model's dtype. JAX has no RoPE kernel."""

import math

import jax.numpy as jnp

from .shared import _compiled


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
    return jnp.clip((jnp.arange(rotary_dim // 2, dtype=wide) - low) / (high - low), 0, 1)


def _scaled_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    exponents = jnp.arange(0, rotary_dim, 2, dtype=wide) / rotary_dim
    if rope_type != "yarn":
        return 1.0 / _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length) ** exponents, 1.0
    extrapolation = 1.0 / theta**exponents
    ramp = _yarn_ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide)
    return extrapolation / factor * ramp + extrapolation * (1 - ramp), 0.1 * math.log(factor) + 1.0


@_compiled(
    "rotary_dim",
    "theta",
    "rope_type",
    "factor",
    "original_max_positions",
    "beta_fast",
    "beta_slow",
    "truncate",
    "length",
)
def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    frequencies, attention_factor = _scaled_frequencies(*args, jnp.float32)
    return {"frequencies": frequencies, "attention_factor": jnp.asarray(attention_factor, dtype=jnp.float32)}


@_compiled(
    "pairing",
    "rotary_dim",
    "theta",
    "position",
    "rope_type",
    "factor",
    "original_max_positions",
    "beta_fast",
    "beta_slow",
    "truncate",
)
def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = jnp.asarray(x)
    wide = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
    length = position + x.shape[-2]  # the last position + 1, as HF's dynamic update measures a sequence
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    frequencies, attention_factor = _scaled_frequencies(*args, wide)
    angles = jnp.arange(position, length, dtype=wide)[:, None] * frequencies
    cos, sin = ((f(angles) * attention_factor).astype(x.dtype) for f in (jnp.cos, jnp.sin))
    return _turned(x, cos, sin, pairing, rotary_dim)


def _turned(x, cos, sin, pairing, rotary_dim):
    turned, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if pairing == "interleaved":
        pairs = turned.reshape(*turned.shape[:-1], -1, 2)
        first, second = pairs[..., 0], pairs[..., 1]
        turned = jnp.stack([first * cos - second * sin, second * cos + first * sin], axis=-1).reshape(turned.shape)
    else:
        first, second = jnp.split(turned, 2, axis=-1)
        turned = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return jnp.concatenate([turned, rest], axis=-1)
