"""RoPE caches computed in the model's float16: positions and angles in half precision, so that 4096 x 0.1 is
409.5 and position 1000's slow pairs turn by the wrong angle (the class of mlx#2791)."""

import numpy as np

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.rotary import _fused_rope
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
RUN_IN = ("float16",)
MUST_FAIL = ("fused_rope_decode_offset", "fused_rope_llama3_scaling")


def fused_rotary(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = np.asarray(x)
    B, T, half = x.shape[0], x.shape[-2], x.dtype.type  # the bug: every step in the model's dtype
    inv_freq = half(1.0) / half(theta) ** (np.arange(0, rotary_dim, 2).astype(half) / half(rotary_dim))
    if scaling == "llama3":  # Llama 3.1's, as the adapter's, in float16
        wavelength = half(2 * np.pi) / inv_freq
        smooth = (half(8192) / wavelength - half(1)) / half(3)
        blended = (half(1) - smooth) * inv_freq / half(factor) + smooth * inv_freq
        kept = np.where(wavelength > 8192, inv_freq / half(factor), inv_freq)
        inv_freq = np.where((wavelength >= 2048) & (wavelength <= 8192), blended, kept).astype(half)
    angles = np.arange(position + T).astype(half)[:, None] * inv_freq
    positions = np.broadcast_to(np.arange(position, position + T), (B, T)).astype(np.int64)
    cos, sin = np.cos(angles).astype(half), np.sin(angles).astype(half)
    return _run(_fused_rope, pairing, rotary_dim, x=x, cos=cos, sin=sin, positions=positions)["rotated"]
