"""Dynamic NTK measuring the sequence by the rows it is given (x.shape[-2]) instead of its last position + 1: one new
token after a long cache is a sequence of 1, within L0, so its base stays theta where HF's dynamic update
("seq_len = torch.max(position_ids) + 1") scales it."""

import numpy as np

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.rope_scaling import _scaled_table
from attention_conformance.adapters.onnxruntime.rotary import _fused_rope
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
MUST_FAIL = ("rope_dynamic_one_token_past_cache", "rope_dynamic_past_original_length", "rope_dynamic_far")


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    x = np.asarray(x)
    B, T = x.shape[0], x.shape[-2]
    wide = np.float64 if x.dtype == np.float64 else np.float32
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, T)  # the bug
    inv_freq, attention_factor = _scaled_table(*args, wide)
    angles = np.arange(position + T, dtype=wide)[:, None] * inv_freq
    cos, sin = ((f(angles) * wide(attention_factor)).astype(x.dtype) for f in (np.cos, np.sin))
    positions = np.broadcast_to(np.arange(position, position + T), (B, T)).astype(np.int64)
    return _run(_fused_rope, pairing, rotary_dim, x=x, cos=cos, sin=sin, positions=positions)["rotated"]
