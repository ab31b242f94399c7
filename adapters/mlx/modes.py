"""MLX's modes: each op as written (eager: MLX's lazy graph, evaluated at the op's return), or traced once by
mx.compile and run as one compiled graph.

One boundary for every op: NumPy inputs become mx.arrays, the op's own code is traced with shared's helpers
passing mx.arrays through (shared._tracing), and the outputs come back as the eager op returns them. An op that
ports a checkpoint (NumPy, attention_conformance.ports) keeps that port outside: its MLX part (shared._core)
is what is compiled.
"""

import functools
import inspect

import mlx.core as mx
import numpy as np
from mlx.utils import tree_map

from . import shared

MODES = {
    "eager": "each op as written: MLX's lazy graph, evaluated once when the op reads its outputs back to NumPy",
    "compiled": (
        "each op traced by mx.compile (shapeless=False: a new shape or dtype retraces) and run as its compiled "
        "graph, one compiled function per op and per value of its Python arguments, the random state its input and "
        "output; a checkpoint's NumPy port stays outside the graph"
    ),
}

_NUMPY_AROUND = {"attention_module", "layer_mask"}  # they port a checkpoint with NumPy around their _core
_COMPILED = {}  # (function, array arguments' names, Python arguments) -> its mx.compile'd function


def _arrays(v):  # an array, or a layer's state (a dict of them)
    if isinstance(v, np.ndarray):
        # Integer offsets (cu_seqlens) set the graph's shapes (a padded batch's rows): constants, as Python numbers are
        return v.dtype.kind not in "iu"  # bfloat16 (ml_dtypes) is kind "V": an array like the other floats
    return isinstance(v, dict) and all(isinstance(a, np.ndarray) for a in v.values())


def _boundary(fn):
    """fn (NumPy in, NumPy out) compiled: arrays in as mx.arrays, fn traced, its outputs back to NumPy."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        given = signature.bind(*args, **kwargs).arguments
        names = tuple(k for k, v in given.items() if _arrays(v))
        constants = {k: v for k, v in given.items() if k not in names}
        # mx.compile retraces on a changed Python argument too (measured, MLX 0.32), but keyed by its hash: 1, 1.0
        # and True are one key there. Bound here and keyed by repr (type and exact value), nothing is left to
        # guess; shapeless=True would reuse a graph whose shape-derived Python numbers (scales, slices) are stale.
        layout = tuple((k, tuple(given[k]) if isinstance(given[k], dict) else None) for k in names)
        # An array constant keyed by its values: NumPy's repr elides the middle of one past 1000 elements.
        exact = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in constants.items()}
        key = (fn, layout, repr(sorted(exact.items())))
        if key not in _COMPILED:

            def traced(*arrays, names=names, constants=constants):
                return fn(**dict(zip(names, arrays)), **constants)

            # The random state in and out: a seeded op (dropout, initial weights) draws as eagerly, and the
            # global state is left where eager leaves it, not holding a traced array.
            _COMPILED[key] = mx.compile(traced, inputs=mx.random.state, outputs=mx.random.state)
        shared._tracing.on = True
        try:
            out = _COMPILED[key](*(tree_map(shared._mx, given[k]) for k in names))
        finally:
            shared._tracing.on = False
        return tree_map(lambda a: shared._np(a) if isinstance(a, mx.array) else a, out)

    return run


def _around(op):
    """op run as written, its NumPy port included, with its shared._core compiled through the boundary."""

    @functools.wraps(op)
    def run(*args, **kwargs):
        shared._tracing.boundary = _boundary
        try:
            return op(*args, **kwargs)
        finally:
            shared._tracing.boundary = None

    return run


def in_mode(mode, op):
    """`op` as `mode` runs it: same signature, NumPy in, NumPy out; the first mode's is op itself."""
    if mode == "eager":
        return op
    if mode != "compiled":
        raise ValueError(f"unknown mode {mode!r}: one of {list(MODES)}")
    return _around(op) if op.__name__ in _NUMPY_AROUND else _boundary(op)
