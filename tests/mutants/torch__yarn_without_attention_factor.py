"""YaRN's frequencies right and its attention factor left out: cos and sin not multiplied by 0.1 ln(factor) + 1 (a
port that reads inv_freq from _compute_yarn_parameters and drops the second value it returns), so every rotated
query and key is 1 / 1.14 as long as it should be at factor 4."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch import rope_scaling
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = (
    "rope_yarn_qwen2",
    "rope_yarn_gpt_oss_untruncated",
    "rope_yarn_partial",
    "rope_frequencies_yarn_truncated",
    "rope_frequencies_yarn_untruncated",
)


def _without_factor(*args):
    inv_freq, _ = rope_scaling._scaled_frequencies(*args)
    return inv_freq, 1.0  # the bug


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    inv_freq, attention_factor = _without_factor(*args, torch.float32)
    return {"frequencies": _np(inv_freq), "attention_factor": _np(torch.tensor(attention_factor, dtype=torch.float32))}


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = _t(x)
    positions = torch.arange(position, position + x.shape[-2])
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
    inv_freq, attention_factor = _without_factor(*args, int(positions.max()) + 1, wide)
    angles = positions.to(wide)[:, None] * inv_freq
    cos, sin = ((f(angles) * attention_factor).to(x.dtype) for f in (torch.cos, torch.sin))
    return _np(rope_scaling._turned(x, cos, sin, pairing, rotary_dim))
