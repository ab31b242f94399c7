"""An answer computed once, given again: the oracle's (adapters/reference/) speed, never its numbers.

fused_attention and multi_head_attention compute the same heads, and the layers the same projections,
from the same GPT-2-shaped inputs (seconds each); float32 inputs are the float64 ones' numbers. An
empty oracle cache filled GPT-2's shape for 34 of a run's 49 seconds before the oracle remembered them.
"""

import collections
import contextlib
import contextvars
import copy
import functools
import hashlib
import inspect

import numpy as np

_ANSWERS = collections.OrderedDict()  # key -> (answer, what it appended to records(), its bytes), the latest last
_HELD = [0]  # the bytes _ANSWERS holds, kept as it changes: summed afresh at each answer, it was 6 of a cold run's
# 64 seconds (1.7 million calls of _size, measured under cProfile, torch, issue 54)
# GPT-2's heads or a projection are 6 MiB, 12 with their bound: one dtype's exact answers and bounds, so that the
# fused case finds them beside the multi-head one. Filled where the reference computes: as the oracle on a first run
# (a warm run reads the oracle's disk cache instead), and as an adapter under test, whose memory the benchmark weighs.
_MOST_BYTES = 128 << 20


def remembered(context, records=lambda: None):
    """Decorate a function of arrays so that a call with the same arguments in float64 and the same
    `context()` (what else the answer depends on: the oracle's rounding, a bound's units) is answered with a copy
    of the first answer. A function that takes float32 or float16 numbers must compute on their float64 values (the
    oracle's _f64). An argument with a `remembered_as()` (bounds.Bounded: its value and its bound) is known by the
    arrays it returns. `records()` is a list the function appends to as it computes (bounds' overflows), or None:
    what the first call appended, an answer given again appends again."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def answer(*args, **kwargs):
            try:
                arguments = signature.bind(*args, **kwargs).arguments
                h = hashlib.sha256(f"{function.__qualname__}|{context()}".encode())
                for name, value in arguments.items():
                    for part in _arrays(value):
                        a = np.ascontiguousarray(part, dtype=np.float64)
                        h.update(f"|{name}|{a.shape}|".encode())
                        h.update(a.tobytes())
            except Exception:  # noqa: BLE001 - arguments that are not numbers: the function says what is wrong
                return function(*args, **kwargs)
            key, log = h.digest(), records()
            if key in _ANSWERS:
                _ANSWERS.move_to_end(key)
                answer, appended, _ = _ANSWERS[key]
                if log is not None:
                    log.extend(appended)
                return copy.deepcopy(answer)
            start = 0 if log is None else len(log)
            answer = function(**arguments)
            size = _size(answer)
            _ANSWERS[key] = (answer, [] if log is None else log[start:], size)
            _HELD[0] += size
            while len(_ANSWERS) > 1 and _HELD[0] > _MOST_BYTES:
                _HELD[0] -= _ANSWERS.popitem(last=False)[1][2]
            return copy.deepcopy(answer)

        return answer

    return decorate


def forget():
    """Drop every answer: the next call computes again."""
    _ANSWERS.clear()
    _HELD[0] = 0
    _PRODUCTS.clear()


_PRODUCTS = collections.OrderedDict()  # the operands' digest -> their product, the latest last
_MOST_PRODUCT_BYTES = 256 << 20  # a GPT-2-shaped answer's products, whole: its bound asks for them next
_WORTH = 1 << 22  # multiply-adds below which a product is computed again: hashing its operands costs about as much


_remembering = contextvars.ContextVar("remembering_products", default=False)


@contextlib.contextmanager
def remembering_products():
    """Products are remembered and given again inside this, and only there (verify.py asks the oracle's exact answer,
    then its bound, inside one); forgotten when the outermost one ends. The reference run as an adapter under test
    would hold their memory for nothing."""
    token = _remembering.set(True)
    try:
        yield
    finally:
        _remembering.reset(token)
        if not _remembering.get():
            _PRODUCTS.clear()


def product(matmul, a, b):
    """matmul(a, b) (deterministic.matmul), given again when the same operands come back. The oracle's bound
    (tolerance_model) runs the exact answer's steps on the same numbers beside its error terms, so each product
    of its values is one the exact answer has just computed: at GPT-2's shape, a third of a float32 bound's time
    (measured under load, issue 43)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not _remembering.get() or a.size * (b.shape[-1] if b.ndim > 1 else 1) < _WORTH:
        return matmul(a, b)
    h = hashlib.sha256(f"{matmul.__module__}.{matmul.__qualname__}|".encode())
    for operand in (a, b):
        operand = np.ascontiguousarray(operand)
        h.update(f"{operand.shape}|".encode())
        h.update(operand.data)
    key = h.digest()
    if key not in _PRODUCTS:
        _PRODUCTS[key] = matmul(a, b)
        while len(_PRODUCTS) > 1 and sum(p.nbytes for p in _PRODUCTS.values()) > _MOST_PRODUCT_BYTES:
            _PRODUCTS.popitem(last=False)
    _PRODUCTS.move_to_end(key)
    return _PRODUCTS[key].copy()  # a caller may scale its product in place


def _arrays(value):
    """The arrays a leaf of arguments or answers is: a bounds.Bounded array's value, bound and sum length."""
    known_as = getattr(value, "remembered_as", None)
    return known_as() if known_as is not None else (np.asarray(value),)


def _size(value):
    if isinstance(value, dict):  # an op's outputs by name
        return sum(map(_size, value.values()))
    if isinstance(value, (tuple, list)):
        return sum(map(_size, value))
    return sum(a.nbytes for a in _arrays(value))
