"""The modes: eager TensorFlow, and the same op traced by tf.function and compiled whole by XLA."""

import contextvars
import functools
import inspect

import numpy as np
import tensorflow as tf
from tensorflow.python.ops.resource_variable_ops import ResourceVariable

MODES = {
    "eager": "TensorFlow's eager execution (Keras 3 on the TensorFlow backend): each op runs as it is called.",
    "compiled": (
        "tf.function(jit_compile=True): the op traced once for each set of Python constants, input shapes and "
        "dtypes and the whole trace compiled by XLA, which raises on what it cannot compile; the layer ops' "
        "checkpoint conversions (NumPy, attention_conformance.ports) run around their compiled layer call"
    ),
}

_TENSOR = object()  # a traced output's tensor, among its Python values
_COMPILING = contextvars.ContextVar("compiling", default=False)


def in_mode(mode, op):
    if mode == next(iter(MODES)):
        return op
    if mode != "compiled":
        raise ValueError(f"unknown mode {mode!r}: {list(MODES)}")
    if not getattr(op, "_compiles_parts", False):
        return _compiled(op)

    @functools.wraps(op)
    def parts_compiled(*args, **kwargs):
        token = _COMPILING.set(True)
        try:
            return op(*args, **kwargs)
        finally:
            _COMPILING.reset(token)

    return parts_compiled


def _compiles_parts(op):
    """Marks an op that needs NumPy on its inputs or outputs (a checkpoint's layout): the compiled mode runs it
    as it is and compiles the parts it calls through _compiled_part."""
    op._compiles_parts = True
    return op


def _compiled_part(fn):
    """fn (TensorFlow in, TensorFlow out) compiled when the compiled mode runs the op calling it, else fn itself."""
    return _compiled(fn, to_numpy=False) if _COMPILING.get() else fn


def _hoisted(next_creator, **kwargs):
    """A variable created while traced. tf.function allows that on its first trace only (and traces twice then),
    and would keep the variable between calls; so it is made eagerly, outside every creator scope (the scope
    stack is the thread's), and the trace sets its initial value where the op created it: every call starts
    from that value, as eager does."""
    initial = None
    if not tf.executing_eagerly():
        initial = kwargs["initial_value"]
        initial = tf.convert_to_tensor(initial() if callable(initial) else initial, dtype=kwargs.get("dtype"))
    with tf.init_scope():
        if initial is not None:
            kwargs["initial_value"] = tf.zeros(initial.shape, initial.dtype)
        variable = ResourceVariable(**kwargs)
    if initial is not None:
        variable.assign(initial)
    return variable


@functools.cache
def _compiled(op, to_numpy=True):
    signature = inspect.signature(op)
    traced = {}  # (the arguments' structure, their Python values, their tensors' shapes and dtypes) -> trace

    @functools.wraps(op)
    def call(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        flat = tf.nest.flatten(arguments)
        is_tensor = [isinstance(v, np.ndarray) or tf.is_tensor(v) for v in flat]
        tensors = [tf.constant(v) if isinstance(v, np.ndarray) else v for v, t in zip(flat, is_tensor) if t]
        # Everything else (sizes, switches, seeds, a layer) is a compile-time constant.
        key = (
            str(tf.nest.map_structure(lambda _: 0, arguments)),
            tuple((v.shape, v.dtype) if t else (type(v), v) for v, t in zip(flat, is_tensor)),  # 1 != 1.0 here
        )
        if key not in traced:
            traced[key] = _trace(op, signature, arguments, flat, is_tensor)
        function, traced_out = traced[key]
        results = function(tensors)  # the first call traces: traced_out is set then
        results = iter([t.numpy() for t in results] if to_numpy else results)
        output, leaves = traced_out
        # The op's Python values (a d_k, a count, a switch) were fixed by the trace.
        return tf.nest.pack_sequence_as(output, [next(results) if v is _TENSOR else v for v in leaves])

    return call


def _trace(op, signature, arguments, flat, is_tensor):
    traced_out = []  # the op's output as traced, and its leaves with each tensor _TENSOR

    def body(tensors):
        given = iter(tensors)
        rebuilt = tf.nest.pack_sequence_as(arguments, [next(given) if t else v for v, t in zip(flat, is_tensor)])
        bound = inspect.BoundArguments(signature, rebuilt)
        with tf.variable_creator_scope(_hoisted):
            output = op(*bound.args, **bound.kwargs)
        flat_out = tf.nest.flatten(output)
        traced_out[:] = [output, [_TENSOR if tf.is_tensor(v) else v for v in flat_out]]
        return [v for v in flat_out if tf.is_tensor(v)]

    function = tf.function(body, jit_compile=True, autograph=False)
    # Each of these functions traces once, by design; TensorFlow's retracing warning counts them as one.
    function._omit_frequent_tracing_warning = True
    return function, traced_out
