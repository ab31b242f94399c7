"""PyTorch: RoPE scaled for long contexts as transformers computes it (src/transformers/modeling_rope_utils.py's
_compute_dynamic_ntk_parameters and _compute_yarn_parameters, bloc97's NTK-aware base): the base's arithmetic in
Python floats, the frequencies, angles and cos and sin in float32 (float64 for a float64 model), cos and sin times
the attention factor before they are cast to the model's dtype."""

import math

import torch

from .shared import _np, _t


def _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length):
    if (
        rope_type == "dynamic"
    ):  # "seq_len = seq_len if ... seq_len > max_position_embeddings else max_position_embeddings"
        length = max(length, original_max_positions)
        factor = factor * length / original_max_positions - (factor - 1)
    return theta * factor ** (rotary_dim / (rotary_dim - 2))


def _yarn_ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide):
    def correction_dim(rotations):
        return (rotary_dim * math.log(original_max_positions / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # HF's "Prevent singularity"
    return torch.clamp((torch.arange(rotary_dim // 2, dtype=wide) - low) / (high - low), 0, 1)


def _scaled_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    """(inv_freq, attention_factor), HF's pair."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(wide) / rotary_dim
    if rope_type != "yarn":
        base = _ntk_base(rotary_dim, theta, rope_type, factor, original_max_positions, length)
        return 1.0 / (base**exponents), 1.0
    pos_freqs = theta**exponents
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - _yarn_ramp(
        rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, wide
    )
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, 0.1 * math.log(factor) + 1.0


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _scaled_frequencies(*args, torch.float32)
    return {"frequencies": _np(inv_freq), "attention_factor": _np(torch.tensor(attention_factor, dtype=torch.float32))}


def _scaled_cos_sin(positions, args, dtype):
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    length = int(positions.max()) + 1  # dynamic_rope_update's "seq_len = torch.max(position_ids) + 1"
    inv_freq, attention_factor = _scaled_frequencies(*args, length, wide)
    angles = positions.to(wide)[:, None] * inv_freq
    return (angles.cos() * attention_factor).to(dtype), (angles.sin() * attention_factor).to(dtype)


def _turned(x, cos, sin, pairing, rotary_dim):
    turned, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if pairing == "interleaved":  # GPT-J's rotate_every_two on pairs (2i, 2i+1)
        cos, sin = (c.repeat_interleave(2, dim=-1) for c in (cos, sin))
        pairs = turned.unflatten(-1, (-1, 2))
        swapped = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    else:  # HF's rotate_half
        cos, sin = (torch.cat([c, c], dim=-1) for c in (cos, sin))
        half = rotary_dim // 2
        swapped = torch.cat([-turned[..., half:], turned[..., :half]], dim=-1)
    return torch.cat([turned * cos + swapped * sin, rest], dim=-1)


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = _t(x)
    positions = torch.arange(position, position + x.shape[-2])
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
    cos, sin = _scaled_cos_sin(positions, args, x.dtype)
    return _np(_turned(x, cos, sin, pairing, rotary_dim))
