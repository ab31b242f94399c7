"""elementary.py: power, cos and sin, tanh of bounded values, within their bounds where a framework's float32 kernel
computes them, and beyond where half precision does."""

import numpy as np

from attention_conformance import bounds, elementary
from attention_conformance.bounds import Bounded

RNG = np.random.default_rng(0)
RNG.uniform(-1, 1, (4 * 16 + 16 * 3))  # the draws tests/test_bounds.py makes first: the same scores as its
SCORES = RNG.uniform(-5, 5, (3, 8)).astype(np.float32)


def _within(got, bounded):
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - bounded.value) <= bounded.err))


def test_float32_cos_and_sin_of_float32_angles_are_within_their_bound_and_a_half_precision_angle_is_not():
    """RoPE's angles, position x frequency computed in float32 (elementary.power, in_float32_at_least), whatever the
    dtype: NumPy's float32 cos and sin land within the bound; angles computed in float16 do not."""
    theta, R = 10000.0, 16
    exponents = np.arange(0, R, 2) / R
    exact = theta**-exponents
    positions = np.arange(4090, 4100)
    f32 = (1.0 / np.float32(theta) ** (np.arange(0, R, 2, dtype=np.float32) / np.float32(R))).astype(np.float32)
    angles32 = positions.astype(np.float32)[:, None] * f32
    f16 = (1 / np.float16(theta) ** (np.arange(0, R, 2).astype(np.float16) / np.float16(R))).astype(np.float16)
    angles16 = positions.astype(np.float16)[:, None] * f16
    with bounds.computed_in("bfloat16"), bounds.in_float32_at_least():
        cos, sin = elementary.cos_sin(positions[:, None] * elementary.power(exact, theta, exponents))
        assert _within(np.cos(angles32), cos) and _within(np.sin(angles32), sin)
        assert not _within(np.cos(angles16.astype(np.float32)), cos)
        assert cos.err.max() < 1e-3  # 4096 x float32's rounding, not bfloat16's (2**-9 of 4096 is 8 radians)


def test_a_float32_soft_cap_is_within_its_bound_and_a_float16_one_is_not():
    with bounds.computed_in("float32"):
        capped = elementary.tanh(Bounded(SCORES * 8) / 5.0) * 5.0
        got = np.tanh(SCORES * 8 / np.float32(5.0)) * np.float32(5.0)
        assert _within(got, capped)
        assert not _within(np.tanh((SCORES * 8).astype(np.float16) / np.float16(5)) * np.float16(5), capped)
