"""The one comparison helper: an output against what it should be, within an allowed error, and
the units a result is told in (ULPs of the dtype under test)."""

import warnings

import numpy as np

from attention_conformance.dtypes import LOW_PRECISION, np_dtype


class Nonconformance(AssertionError):
    """An output beyond what it may be; `worst`, where one comparison failed, its worst element (verify.Subject.keep):
    what the root cause line reads (run/root_cause.py)."""

    def __init__(self, message="", worst=None):
        super().__init__(message)
        self.worst = worst


def compare(got, expected, allowed, nan_expected=False):
    """(margin, worst index, error, allowed): margin is worst |error| / allowed, > 1 fails. `nan_expected`: a NaN the
    expected values hold is the answer (the textbook's 0/0, declared as its side of a split: sides.py), met by NaN."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # the same infinity on both sides is no error: inf - inf is NaN
        err = np.where(got == expected, 0.0, np.abs(got - expected))
    if nan_expected:
        err = np.where(np.isnan(expected), np.where(np.isnan(got), 0.0, np.inf), err)
    if err.size == 0:
        return 0.0, (0,) * err.ndim, 0.0, 0.0
    allowed = np.broadcast_to(np.asarray(allowed, dtype=np.float64), err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / allowed)
    nan_answer = np.isnan(expected) if nan_expected else False
    ratio = np.where(np.isnan(got) != nan_answer, np.inf, ratio)  # NaN never conforms, but where it is the answer
    worst = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.ndim else ()
    return float(ratio[worst]), worst, float(err[worst]), float(allowed[worst])


def allowed_error(spec, tol, dtype, expected, plain=None):
    """What |got - expected| may be, elementwise.

    float32 and float64: atol + rtol x |expected|, from the named tolerance. float16 and
    bfloat16 (unless the tolerance is exact): k x max|plain - expected| + ulps x ULP(expected),
    where `plain` is the same computation done plainly in that dtype (spec: low_precision). The
    baseline is the tensor's worst plain error: elementwise, a plain result that happens to round
    exactly would demand exactness of everyone else.
    """
    expected = np.asarray(expected, dtype=np.float64)
    if dtype in LOW_PRECISION and tol.name != "exact":
        k, n_ulps = spec.tolerances["low_precision"].bounds(dtype)
        unit = np.spacing(np.abs(expected).astype(np_dtype(dtype))).astype(np.float64)
        with np.errstate(invalid="ignore"):  # NaN in both where the side computed is the textbook's 0/0: no error
            baseline = np.nan_to_num(np.abs(np.asarray(plain, dtype=np.float64) - expected)).max(initial=0.0)
        return k * baseline + n_ulps * unit
    atol, rtol = tol.bounds(dtype)
    return atol + rtol * np.abs(expected)


def ulps(got, expected, dtype):
    """Distance in units of the last place of `dtype` at the expected value."""
    exp = np.asarray(expected, dtype=np.float64).astype(np_dtype(dtype))
    return float(
        np.abs(np.asarray(got, dtype=np.float64) - exp.astype(np.float64)) / np.spacing(np.abs(exp)).astype(np.float64)
    )


def max_ulps(got, expected, dtype):
    """Largest |error| in ULPs of `dtype` at the tensor's largest expected magnitude.

    Per-element ULPs explode where an output is a near-cancellation (an entry of 1e-8 whose
    terms were O(1)); the tensor's own scale is the honest unit for the summary.
    """
    if np.size(got) == 0:
        return 0.0
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(np.asarray(got, dtype=np.float64) - expected)
    unit = np.spacing(np.asarray(np.abs(expected).max()).astype(np_dtype(dtype))).astype(np.float64)
    return float(err.max() / unit)


def as_numbers(label, value):
    """An adapter's output as an array of real numbers, or the Nonconformance that says what it was
    instead: however wrong an output is, it must never crash the suite's own code."""
    if value is None or isinstance(value, (str, bytes, dict)):
        raise Nonconformance(
            f"{label}: returned {type(value).__name__} {show(value)[:80]}, but should return an array of numbers"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - ragged lists, objects that refuse conversion: all the adapter's doing
        raise Nonconformance(
            f"{label}: returned a {type(value).__name__} that is not an array of numbers ({type(exc).__name__}: {exc})"
        ) from None
    if array.dtype.kind not in "biuf" and array.dtype.name != "bfloat16":
        raise Nonconformance(f"{label}: returned an array of dtype {array.dtype}, but should return real numbers")
    return array


def show(value):
    return repr(value.tolist() if isinstance(value, np.ndarray) else value)
