"""Wrap an adapter so every nonzero float it returns moves one ULP away from zero."""

import inspect

import numpy as np

from attention_conformance.contract.ops import CONTRACT


def _nudge(value):
    if isinstance(value, dict):  # round_trip is weights read back, no arithmetic: nothing to round differently
        return {k: v if k == "round_trip" else _nudge(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        # Exact zeros stay: a masked weight is exp(-inf) = 0 with no rounding to be off by.
        nudged = np.nextafter(value, np.copysign(np.inf, value).astype(value.dtype))
        return np.where(value == 0, value, nudged)
    return value


def one_ulp_off(base):
    """A whole adapter module's namespace: `base` with every contract function wrapped."""

    def wrap(fn):
        def wrapped(*args, **kwargs):
            return _nudge(fn(*args, **kwargs))

        wrapped.__signature__ = inspect.signature(fn)  # the contract check reads parameter names
        return wrapped

    declared = {"DTYPES": base.DTYPES, "NOT_APPLICABLE": getattr(base, "NOT_APPLICABLE", {})}
    # its modes' keys, and its numeric switches: without pin_numerics JAX's float64 runs in float32 when the wrapper
    # is the first adapter loaded (a standalone fuzz of jax__one_ulp_off in float64 found float32 errors)
    kept = ("MODES", "in_mode", "pin_numerics")
    declared |= {name: getattr(base, name) for name in kept if hasattr(base, name)}
    return declared | {name: wrap(getattr(base, name)) for name in CONTRACT if hasattr(base, name)}
