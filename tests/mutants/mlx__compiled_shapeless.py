"""mx.compile(shapeless=True): one graph per op whatever the inputs' shapes, so the numbers the op's Python reads
off a shape at its first trace (the 1/sqrt(d_k) of a head two wide) stay in the graph for every later shape. MLX
retraces nothing and says nothing (measured, MLX 0.32.4): a speed switch that is only right for code with no
shape-derived constant. Eager never compiles: only the compiled column shows it."""

import functools

import mlx.core as mx
import numpy as np
from mlx.utils import tree_map

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx import shared

RUN_MODE = "compiled"
EXPECTED = "caught"
MUST_FAIL = (
    "binary",
    "two_sentences",
)  # attention() traced first on sat: [6, 3] in, d_k = 2 (binary: 4; two_sentences: a batch)

_COMPILED = {}


def in_mode(mode, op):
    if mode == "eager":
        return op

    @functools.wraps(op)
    def run(**given):
        names = tuple(k for k, v in given.items() if isinstance(v, np.ndarray))
        constants = {k: v for k, v in given.items() if k not in names}
        key = (op, names, repr(sorted(constants.items())))
        if key not in _COMPILED:

            def traced(*arrays, names=names, constants=constants):
                return op(**dict(zip(names, arrays)), **constants)

            _COMPILED[key] = mx.compile(traced, shapeless=True)  # the bug: no retrace for a new shape
        shared.tracing.on = True
        try:
            out = _COMPILED[key](*(shared._mx(given[k]) for k in names))
        finally:
            shared.tracing.on = False
        return tree_map(lambda a: shared._np(a) if isinstance(a, mx.array) else a, out)

    return run
