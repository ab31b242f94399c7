"""RoPE scaled for a longer context than the model was trained on (spec conventions.rope_scaling): NTK-aware (bloc97),
dynamic NTK (HF's rope_type "dynamic") and YaRN (arXiv:2309.00071, HF's rope_type "yarn") with its attention factor."""

import contextlib
from decimal import Decimal, localcontext

import numpy as np

from attention_conformance import bounds, deterministic, elementary

from .rotary import _rotated
from .shared import _bounded, _f64

_PI = Decimal("3.141592653589793238462643383279502884197")


def _changed_base(rotary_dim, theta, rope_type, factor, original_max_positions, length):
    """NTK's base theta s^(R / (R - 2)), Decimal: s = factor (NTK-aware); for dynamic s = factor L / L0 - (factor - 1)
    once the sequence's length L (its last position + 1) passes L0, else the base unchanged. With how far a framework's
    float64 arithmetic may move it (relative): its few roundings, and the cancellation in s (2 u factor L / L0 / s)."""
    R, L, L0 = int(rotary_dim), int(length), int(original_max_positions)
    if rope_type == "dynamic" and L <= L0:
        return Decimal(theta), 0.0
    exponent = Decimal(R) / (R - 2)
    s = Decimal(factor) if rope_type == "ntk" else Decimal(factor) * L / L0 - (Decimal(factor) - 1)
    moved = float(exponent) * (2 * float(factor) * L / L0 + 2) / float(s) + 3 if rope_type == "dynamic" else 4.0
    return Decimal(theta) * s**exponent, moved * 2.0**-53


def _ramp(rotary_dim, theta, original_max_positions, beta_fast, beta_slow, truncate, like):
    """YaRN's share of the interpolated frequency for each pair i: (i - low) / (high - low) clipped to [0, 1], low and
    high the pairs that turn beta_fast and beta_slow times over L0 tokens, R ln(L0 / (2 pi beta)) / (2 ln theta),
    floored and ceiled (`truncate`), kept in 0..R-1. Decimal for low and high (a floor decided on the exact value);
    with a bound, the ramp as HF computes it in float32 (its arange minus low, over high - low)."""
    R = int(rotary_dim)
    with localcontext() as exact:
        exact.prec = 40

        def dim(rotations):
            ratio = Decimal(int(original_max_positions)) / (Decimal(rotations) * 2 * _PI)
            return R * ratio.ln() / (2 * Decimal(theta).ln())

        low, high = dim(beta_fast), dim(beta_slow)
        if truncate:
            low, high = low.to_integral_value(rounding="ROUND_FLOOR"), high.to_integral_value(rounding="ROUND_CEILING")
        low, high = float(max(low, Decimal(0))), float(min(high, Decimal(R - 1)))
    if low == high:
        high += 0.001  # HF's "Prevent singularity"
    pairs = np.arange(R // 2, dtype=np.float64)
    if not _bounded(like):
        return np.clip((pairs - low) / (high - low), 0.0, 1.0)
    unit = bounds.units()[1]
    lows, highs = (v if truncate else bounds.Bounded(v, abs(v) * unit) for v in (low, high))  # floats rounded there
    shares = (bounds.Bounded(pairs) - lows) / (highs - lows)
    return bounds.Bounded(np.clip(shares.value, 0.0, 1.0), shares.err)  # clipping moves no value farther


def _scaled_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length, like
):
    """The R/2 frequencies and the factor cos and sin are multiplied by (YaRN's 0.1 ln(factor) + 1, 1 otherwise):
    exact (Decimal), or with a bound as a framework computes them in float32 at least (elementary.power)."""
    R = int(rotary_dim)
    exponents = np.arange(0, R, 2) / R
    with localcontext() as exact:
        exact.prec = 40
        base, moved = (
            (Decimal(theta), 0.0)
            if rope_type == "yarn"
            else _changed_base(R, theta, rope_type, factor, original_max_positions, length)
        )
        f = np.array([float(base ** (Decimal(-2 * i) / R)) for i in range(R // 2)])
        attention_factor = float(Decimal("0.1") * Decimal(factor).ln() + 1) if rope_type == "yarn" else 1.0
    if _bounded(like):
        f = elementary.power(f, float(base), exponents, raised=1 + moved / bounds.units()[1])
    if rope_type != "yarn":
        return f, attention_factor
    share = _ramp(R, theta, original_max_positions, beta_fast, beta_slow, truncate, like)
    return f / factor * share + f * (1 - share), attention_factor


def rope_frequencies(
    rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length
):
    """The frequencies (float32, as HF's inv_freq) and the attention factor for a sequence `length` long."""
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    if bounds.units() is None:
        f, attention_factor = _scaled_frequencies(*args, like=None)
        return {"frequencies": f, "attention_factor": np.float64(attention_factor)}
    with bounds.in_float32_at_least():
        f, attention_factor = _scaled_frequencies(*args, like=bounds.Bounded(0.0))
        scaling = bounds.Bounded(attention_factor, 3 * attention_factor * bounds.units()[1])  # ln, product, sum
    f, scaling = _f64(f, scaling)
    return {"frequencies": f, "attention_factor": scaling}


def _scaled_cos_sin(
    positions,
    length,
    rotary_dim,
    theta,
    rope_type,
    factor,
    original_max_positions,
    beta_fast,
    beta_slow,
    truncate,
    like,
):
    """cos and sin at `positions` for a sequence `length` long (dynamic NTK's base grows with it), multiplied by the
    attention factor in float32 at least (HF's "cos = emb.cos() * self.attention_scaling"), then stored in the dtype."""
    args = (rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate, length)
    with bounds.in_float32_at_least() if _bounded(like) else contextlib.nullcontext():
        f, attention_factor = _scaled_frequencies(*args, like=like)
        angles = positions[:, None] * f
        cos, sin = elementary.cos_sin(angles) if _bounded(angles) else deterministic.cos_sin(angles)
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor
    return _f64(cos, sin)


def scaled_rotary(
    x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate
):
    """x's rows are the tokens at positions position, position + 1, ..: each turned by its position times the scaled
    frequencies. Dynamic NTK measures the sequence by its last position + 1."""
    (x,) = _f64(x)
    positions = np.arange(position, position + np.shape(x)[-2])
    scaling = (rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate)
    cos, sin = _scaled_cos_sin(positions, int(position) + np.shape(x)[-2], rotary_dim, theta, *scaling, like=x)
    return _rotated(x, cos, sin, pairing, rotary_dim)
