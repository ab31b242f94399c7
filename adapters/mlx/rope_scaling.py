"""MLX: RoPE scaled for long contexts through its own kernel, mx.fast.rope: NTK-aware's and dynamic NTK's changed
base as its `base` (the base's arithmetic in Python floats, as HF's config), YaRN as mlx-lm's YarnRoPE runs it (its
`freqs`, the inverses of the blended frequencies; the rotated dims of x multiplied by the attention factor first)."""

import math

import mlx.core as mx

from .shared import _mx, _np


def _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length):
    if rope_type == "dynamic":
        if length <= original_max_positions:  # up to the original length, RoPE's own base
            return theta
        factor = factor * length / original_max_positions - (factor - 1)
    return theta * factor ** (rotary_dim / (rotary_dim - 2))


def _yarn_mask(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate):
    """mlx-lm's yarn_find_correction_range and yarn_linear_ramp_mask (HF's, truncate as the config says)."""

    def correction_dim(rotations):
        return rotary_dim * math.log(original_max_positions / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    high = high + 0.001 if low == high else high
    return mx.clip((mx.arange(rotary_dim // 2, dtype=mx.float32) - low) / (high - low), 0, 1)


def _yarn_periods(rotary_dim, theta, factor, original_max_positions, beta_fast, beta_slow, truncate):
    """mlx-lm's YarnRoPE._freqs: freq_extra = base ** (arange / dims), freq_inter = factor * freq_extra, then
    (freq_inter * freq_extra) / (freq_inter * freq_mask + freq_extra * (1 - freq_mask)), freq_mask = 1 - the ramp."""
    freq_extra = theta ** (mx.arange(0, rotary_dim, 2, dtype=mx.float32) / rotary_dim)
    freq_inter = factor * freq_extra
    freq_mask = 1.0 - _yarn_mask(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate)
    return (freq_inter * freq_extra) / (freq_inter * freq_mask + freq_extra * (1 - freq_mask))


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    if rope_type == "yarn":
        periods = _yarn_periods(rotary_dim, theta, factor, original_max_positions, beta_fast, beta_slow, truncate)
        return {"frequencies": _np(1.0 / periods), "attention_factor": _np(mx.array(0.1 * math.log(factor) + 1.0))}
    base = _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length)
    frequencies = 1.0 / mx.power(mx.array(base, mx.float32), mx.arange(0, rotary_dim, 2, dtype=mx.float32) / rotary_dim)
    return {"frequencies": _np(frequencies), "attention_factor": _np(mx.array(1.0))}


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = _mx(x)
    common = {"traditional": pairing == "interleaved", "scale": 1.0, "offset": position}
    if rope_type != "yarn":
        length = position + x.shape[-2]  # the last position + 1, as HF's dynamic update measures a sequence
        base = _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length)
        return _np(mx.fast.rope(x, rotary_dim, base=base, **common))
    periods = _yarn_periods(rotary_dim, theta, factor, original_max_positions, beta_fast, beta_slow, truncate)
    mscale = 0.1 * math.log(factor) + 1.0  # YarnRoPE's "x[..., : self.dims] = self.mscale * x[..., : self.dims]"
    x = mx.concatenate([mscale * x[..., :rotary_dim], x[..., rotary_dim:]], axis=-1)
    return _np(mx.fast.rope(x, rotary_dim, base=None, freqs=periods, **common))
