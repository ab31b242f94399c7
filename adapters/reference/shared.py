"""The oracle's arithmetic: every product, sum and exponential in deterministic float64, or on bounds.Bounded
arrays the same steps carrying their error bound; and the rounding of every step's inputs (rounding_to)."""

import contextlib
import contextvars

import numpy as np

from attention_conformance import bounds, deterministic, elementary, sides
from attention_conformance.remembered import product

_round_to = contextvars.ContextVar("round_to", default=None)


@contextlib.contextmanager
def rounding_to(dtype):
    """Round every step's inputs to `dtype`: the plain half-precision baseline for tolerances."""
    token = _round_to.set(dtype)
    try:
        yield
    finally:
        _round_to.reset(token)


def _remembering():
    """What an answer depends on beside its arguments: the rounding of every step, for a bound its units, and the
    side of the spec's splits it is computed on."""
    return _round_to.get(), bounds.units(), sides.taken()


def _f64(*arrays):
    dtype = _round_to.get()
    if dtype is not None:  # in pieces the CPU's cache holds: both conversions of a block's scores went to memory
        rounded = lambda piece: (piece.astype(dtype).astype(np.float64),)  # noqa: E731
        arrays = [deterministic.in_pieces(rounded, np.asarray(a, dtype=np.float64))[0] for a in arrays]
    return [bounds.stored(a) if isinstance(a, bounds.Bounded) else np.asarray(a, dtype=np.float64) for a in arrays]


exp = deterministic.exp


def tanh(a):
    return elementary.tanh(a) if _bounded(a) else deterministic.tanh(a)


# Every product and sum goes through these two, and every softmax checks _bounded: given bounds.Bounded
# arrays (tolerance_model.bound), the same steps also carry how far a correct computation in another summation
# order or dtype may land.
def mm(a, b):
    return bounds.matmul(a, b) if _bounded(a, b) else product(deterministic.matmul, a, b)


def fsum(a, axis=-1, keepdims=False):
    return (bounds.sum if _bounded(a) else deterministic.sum)(a, axis=axis, keepdims=keepdims)


def _bounded(*arrays):
    return any(isinstance(a, bounds.Bounded) for a in arrays)


def _zeros(shape, like):
    """A buffer the steps fill in pieces: Bounded where `like` is, so no piece drops its bound."""
    return bounds.Bounded(np.zeros(shape)) if _bounded(like) else np.zeros(shape)
