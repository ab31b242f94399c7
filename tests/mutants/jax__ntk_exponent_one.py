"""NTK's base raised by the factor alone, theta * factor, where bloc97's formula raises it by factor^(R / (R - 2))
("base = base * a ** (dim / (dim-2))"): the lowest frequency is then divided by factor^((R - 2) / R), not by factor,
and every other a little less than it should be."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax import rope_scaling
from attention_conformance.adapters.jax.shared import _compiled

EXPECTED = "caught"
MUST_FAIL = (
    "rope_ntk_aware",
    "rope_ntk_aware_partial_interleaved",
    "rope_dynamic_past_original_length",
    "rope_dynamic_far",
    "rope_frequencies_ntk_aware",
    "rope_frequencies_dynamic_past_original_length",
)


def _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length):
    if rope_type == "dynamic":
        if length <= original_max_positions:
            return theta
        factor = factor * length / original_max_positions - (factor - 1)
    return theta * factor  # the bug: the exponent R / (R - 2) left out


def _scaled_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    if rope_type == "yarn":
        args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
        return rope_scaling._scaled_frequencies(*args, length, wide)
    exponents = jnp.arange(0, rotary_dim, 2, dtype=wide) / rotary_dim
    return 1.0 / _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length) ** exponents, 1.0


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
    length = position + x.shape[-2]
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    frequencies, attention_factor = _scaled_frequencies(*args, wide)
    angles = jnp.arange(position, length, dtype=wide)[:, None] * frequencies
    cos, sin = ((f(angles) * attention_factor).astype(x.dtype) for f in (jnp.cos, jnp.sin))
    return rope_scaling._turned(x, cos, sin, pairing, rotary_dim)
