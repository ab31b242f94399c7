"""Dynamic NTK scaled within the original length: up to L0 the base is NTK-aware's theta factor^(R / (R - 2)) (a port
that starts its table as the static scaling does), where HF keeps theta until the sequence passes L0 ("seq_len if
seq_len > max_position_embeddings else max_position_embeddings", s = 1 there); past L0 it is right."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch import rope_scaling
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("rope_dynamic_within_original_length", "rope_frequencies_dynamic_within_original_length")


def _scaled_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, wide
):
    if rope_type != "dynamic":
        args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
        return rope_scaling._scaled_frequencies(*args, length, wide)
    s = factor * length / original_max_positions - (factor - 1) if length > original_max_positions else factor  # bug
    base = theta * s ** (rotary_dim / (rotary_dim - 2))
    return 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(wide) / rotary_dim), 1.0


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _scaled_frequencies(*args, torch.float32)
    return {"frequencies": _np(inv_freq), "attention_factor": _np(torch.tensor(attention_factor, dtype=torch.float32))}


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = _t(x)
    positions = torch.arange(position, position + x.shape[-2])
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
    inv_freq, attention_factor = _scaled_frequencies(*args, int(positions.max()) + 1, wide)
    angles = positions.to(wide)[:, None] * inv_freq
    cos, sin = ((f(angles) * attention_factor).to(x.dtype) for f in (torch.cos, torch.sin))
    return _np(rope_scaling._turned(x, cos, sin, pairing, rotary_dim))
