"""ONNX Runtime: RoPE scaled for long contexts through its own kernel, opset 23's RotaryEmbedding, given cos and sin
caches computed as an exporter computes them (HF's rotary embedding traced: the scaled frequencies in float32, cos and
sin times the attention factor, then cast to the model's dtype; float64 for a float64 model). The scaling lives in the
caches: the operator takes no base or factor."""

import math

import numpy as np

from .rotary import _fused_rope
from .shared import _run


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
    return np.clip((np.arange(rotary_dim // 2, dtype=wide) - wide(low)) / wide(high - low), 0, 1)


def _scaled_table(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    exponents = np.arange(0, rotary_dim, 2, dtype=wide) / wide(rotary_dim)
    if rope_type != "yarn":
        base = _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length)
        return wide(1.0) / wide(base) ** exponents, 1.0
    extrapolation = wide(1.0) / wide(theta) ** exponents
    ramp = _yarn_ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide)
    inv_freq = extrapolation / wide(factor) * ramp + extrapolation * (1 - ramp)
    return inv_freq.astype(wide), 0.1 * math.log(factor) + 1.0


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _scaled_table(*args, np.float32)
    return {"frequencies": inv_freq, "attention_factor": np.float32(attention_factor)}


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = np.asarray(x)
    B, T = x.shape[0], x.shape[-2]
    wide = np.float64 if x.dtype == np.float64 else np.float32
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, position + T)
    inv_freq, attention_factor = _scaled_table(*args, wide)
    # The caches hold every position up to the last; the kernel gathers the tokens' rows by position_ids.
    angles = np.arange(position + T, dtype=wide)[:, None] * inv_freq
    cos, sin = ((f(angles) * wide(attention_factor)).astype(x.dtype) for f in (np.cos, np.sin))
    positions = np.broadcast_to(np.arange(position, position + T), (B, T)).astype(np.int64)
    return _run(_fused_rope, pairing, rotary_dim, x=x, cos=cos, sin=sin, positions=positions)["rotated"]
