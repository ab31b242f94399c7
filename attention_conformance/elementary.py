"""power, cos and sin, tanh of bounded values (bounds.py): the elementary functions RoPE, ALiBi and soft-capping use,
each moved by its argument's error and erring by its kernel's own ULPs, as frameworks' kernels document or were
measured."""

import math

import numpy as np

from attention_conformance import bounds, deterministic

# Sleef's u10 cos and sin (torch) within 1 ULP, Eigen's (TensorFlow, XLA) and NumPy's float32 SIMD ones (ONNX
# Runtime's caches here) within 1-2 of 1 where range reduction leaves an absolute error; the power of a RoPE
# frequency, theta ** -e, within 1-2 ULP in glibc, Sleef and Eigen: 4 and 2 leave room for a kernel none documents.
TRIG_ULPS = 4
POW_ULPS = 2
# tanh (soft-capping): 0.5 ULP in torch (Sleef), 4.5 in TensorFlow, 4.1 in JAX, 1.9 in MLX on float32 over [-12, 12]
# (measured); 8 for an ISA whose kernel none of them documents.
TANH_ULPS = 8
# log (Llama 4's attention temperature): within 1 ULP in glibc's logf and Sleef's u10 log, 1-2 in Eigen's plog; 4
# leaves room for an ISA whose kernel none of them documents, as for cos and sin.
LOG_ULPS = 4


def power(exact, base, exponents, raised=0):
    """base ** -exponents (RoPE's frequencies, ALiBi's slopes), given `exact`, as a framework computes it: a kernel's
    power is exp2(-e log2 base), so the rounding of e, of log2 base and of their product each move it by |e ln base| u
    relative (found by the fuzzer: mx.fast.rope's 2.1 |e ln base| u at pair 5 of 8), then its own POW_ULPS and a
    division (HF's 1 / base ** e); a rounded base raised to the integer `raised` (BLOOM's slopes) by raised u more."""
    e = np.abs(raised) + 3 * np.abs(exponents) * math.log(base)
    return bounds.Bounded(exact, exact * (e + POW_ULPS + 1) * bounds.units()[1])


def cos_sin(angle):
    """cos and sin of a bounded angle: each moves by at most the angle's error (|d cos| <= |d angle|) and errs
    TRIG_ULPS units itself; the oracle's own float64 angle and cos_sin are within 2**-52 (|angle| + 1). Never
    beyond 2, whatever the angle's error."""
    value, err = (angle.value, angle.err)
    own = err + 2.0**-52 * (np.abs(value) + 1) + TRIG_ULPS * bounds.units()[1]
    return tuple(bounds.Bounded(v, np.minimum(own, 2.0)) for v in deterministic.cos_sin(value))


def tanh(a):
    """tanh of a bounded value: tanh moves by at most err x its largest slope within err of the value (sech^2 at the
    point nearest 0), errs TANH_ULPS itself; the oracle's own tanh within 2**-50 |tanh|. Never beyond 2."""
    value, err = (a.value, a.err)
    result = deterministic.tanh(value)
    slope = 1 - deterministic.tanh(np.maximum(np.abs(value) - err, 0.0)) ** 2
    own = (TANH_ULPS * bounds.units()[1] + 2.0**-50) * np.abs(result)
    return bounds.Bounded(result, np.minimum(err * slope + own, 2.0))


def log(exact):
    """ln of an exactly held argument (a count plus one), given `exact`: the kernel's own LOG_ULPS (one ULP is at most
    2 u of the result); ln 1 is exactly 0 in every libm, so nothing errs there."""
    return bounds.Bounded(exact, 2 * LOG_ULPS * bounds.units()[1] * np.abs(exact))
