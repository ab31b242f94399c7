"""Wrong adapters confined to the cells a framework declares a divergence in (issue 71): each passed while its
declaration excused any result there; each fails now that the declaration is a claim the run checks."""

import inspect

import numpy as np


def _keeping_signature(fn, wrapped):
    wrapped.__signature__ = inspect.signature(fn)  # the contract check reads parameter names
    return wrapped


def float64_one_percent_off(fn):
    """Every float64 result 1% too large: a declared precision ("float64 computed in float32") allows about 1e-7."""

    def wrapped(*args, **kwargs):
        found = fn(*args, **kwargs)
        items = found.items() if isinstance(found, dict) else [(None, found)]
        out = {k: v * 1.01 if isinstance(v, np.ndarray) and v.dtype == np.float64 else v for k, v in items}
        return out if isinstance(found, dict) else out[None]

    return _keeping_signature(fn, wrapped)


def top_left_shifted_by_one_key(causal_flag):
    """A causal flag over fewer queries than keys aligned top left and one key off: query i of the block sees keys
    0..i+1. The flag itself, asked for one query more (start - 1) and that row dropped; a block as long as the keys
    (start 0) is left alone, so only the tests the framework's top-left convention covers can catch it."""

    def wrapped(x, w_query, w_key, w_value, start):
        if start == 0:
            return causal_flag(x, w_query, w_key, w_value, start)
        return np.asarray(causal_flag(x, w_query, w_key, w_value, start - 1))[..., 1:, :]

    return _keeping_signature(causal_flag, wrapped)


def answering_where_it_raises(fn, op):
    """Where the framework refuses the call (a declared raise), the oracle's own answer in the dtype: numbers, and
    right ones, where the declaration says the call raises. The declaration is stale then, whatever the numbers."""
    from attention_conformance.adapters import reference

    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - whatever the framework raised, numbers instead
            given = inspect.signature(fn).bind(*args, **kwargs).arguments
            floats = [v for v in given.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
            found = getattr(reference, op)(**{k: _float64(v) for k, v in given.items()})
            items = found.items() if isinstance(found, dict) else [(None, found)]
            out = {k: np.asarray(v).astype(floats[0].dtype) for k, v in items}
            return out if isinstance(found, dict) else out[None]

    return _keeping_signature(fn, wrapped)


def _float64(value):
    return value.astype(np.float64) if isinstance(value, np.ndarray) and value.dtype.kind == "f" else value
