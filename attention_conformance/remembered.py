"""An answer computed once, given again: the oracle's (adapters/reference/) speed, never its numbers.

fused_attention and multi_head_attention compute the same heads, and the layers the same projections,
from the same GPT-2-shaped inputs (seconds each); float32 inputs are the float64 ones' numbers. An
empty oracle cache filled GPT-2's shape for 34 of a run's 49 seconds before the oracle remembered them.
"""

import collections
import copy
import functools
import hashlib
import inspect

import numpy as np

_ANSWERS = collections.OrderedDict()  # key -> answer, the latest last
_MOST_BYTES = 64 << 20  # GPT-2's heads or a projection are 6 MiB: memory stays within the benchmark's target


def remembered(context):
    """Decorate a function of arrays so that a call with the same arguments in float64 and the same
    `context()` (the oracle's rounding) is answered with a copy of the first answer. A function that
    takes float32 or float16 numbers must compute on their float64 values (the oracle's _f64)."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def answer(*args, **kwargs):
            try:
                arguments = signature.bind(*args, **kwargs).arguments
                h = hashlib.sha256(f"{function.__qualname__}|{context()}".encode())
                for name, value in arguments.items():
                    a = np.ascontiguousarray(value, dtype=np.float64)
                    h.update(f"|{name}|{a.shape}|".encode())
                    h.update(a.tobytes())
            except Exception:  # noqa: BLE001 - arguments that are not numbers: the function says what is wrong
                return function(*args, **kwargs)
            key = h.digest()
            if key not in _ANSWERS:
                _ANSWERS[key] = function(**arguments)
                while len(_ANSWERS) > 1 and _size(list(_ANSWERS.values())) > _MOST_BYTES:
                    _ANSWERS.popitem(last=False)
            _ANSWERS.move_to_end(key)
            return copy.deepcopy(_ANSWERS[key])

        return answer

    return decorate


def forget():
    """Drop every answer: the next call computes again."""
    _ANSWERS.clear()


def _size(value):
    if isinstance(value, dict):  # an op's outputs by name
        return sum(map(_size, value.values()))
    return sum(map(_size, value)) if isinstance(value, (tuple, list)) else np.asarray(value).nbytes
