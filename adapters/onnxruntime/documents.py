"""ONNX Runtime: the documents' own ops: the mapping table's rows, the whole pipeline, the module forms,
initialisation and the knobs, and training.
"""

import contextlib
import functools
import hashlib
import importlib.metadata
import inspect
import io
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper

from attention_conformance import cache

from .shared import _attention, _new_session, _run


def _project(g, ranks):
    return {"projection": g("MatMul", "x", "w")}


def project(x, w):
    return _run(_project, x=x, w=w)["projection"]


def _transposed_matmul(g, ranks):
    return {"scores": g("MatMul", "q", g.t("k", ranks["k"]))}


def transposed_matmul(q, k):
    return _run(_transposed_matmul, q=q, k=k)["scores"]


def _scale(g, ranks, d_k):
    return {"scaled": g("Div", "scores", g("Sqrt", g.const(d_k)))}


def scale(scores, d_k):
    return _run(_scale, d_k, scores=scores)["scaled"]


def _softmax(g, ranks):
    return {"weights": g("Softmax", "scores", axis=-1)}


def softmax(scores):
    return _run(_softmax, scores=scores)["weights"]


def _blend(g, ranks):
    return {"context": g("MatMul", "weights", "v")}


def blend(weights, v):
    return _run(_blend, weights=weights, v=v)["context"]


def _dot_columns(g, ranks, columns):
    index = [g.const([j], TensorProto.INT64) for j in range(columns)]
    dots = [
        g("ReduceSum", g("Mul", "x", g("Squeeze", g("Gather", "w", i, axis=1), g.const([1], TensorProto.INT64))))
        for i in index
    ]
    return {"by_hand": g("Concat", *(g("Reshape", d, g.const([1], TensorProto.INT64)) for d in dots), axis=0)}


def dot_columns(x, w):
    return _run(_dot_columns, np.shape(w)[1], x=x, w=w)["by_hand"]


def attention(x, w_query, w_key, w_value):
    return _run(_attention, x=x, w_query=w_query, w_key=w_key, w_value=w_value) | {"d_k": np.shape(w_key)[-1]}


@functools.cache
def _exported(form, dtype, shapes):
    """The export of _export's module, kept in the suite's cache (as JAX's compiled
    programs are): an export is a build step, and its graph depends only on the key and the versions."""
    versions = [
        importlib.metadata.version(p) for p in ("torch", "onnx", "onnxscript")
    ]  # without importing torch (1.7 s)
    key = hashlib.sha256(repr((form, dtype, shapes, versions, inspect.getsource(_export))).encode()).hexdigest()[:32]
    path = cache.entry("onnx-export", f"{key}.onnx")
    if path is not None and path.exists():
        model = onnx.ModelProto.FromString(path.read_bytes())
    else:
        model = _export(form, dtype, shapes)
        if path is not None:  # written whole, then renamed: a reader never sees half a model
            cache.write(path, lambda f: f.write(model.SerializeToString()))
    names = {"v1": ("W_query", "W_key", "W_value"), "v2": ("W_query.weight", "W_key.weight", "W_value.weight")}[form]
    held = {i.name for i in model.graph.initializer}
    if not held.issuperset(names):  # a weight no initializer holds would silently keep its random value
        raise RuntimeError(f"torch.onnx.export of SelfAttention_{form} holds initializers {sorted(held)}, not {names}")
    return model.SerializeToString(), names


def _export(form, dtype, shapes):
    """The PyTorch document's module, exported with torch.onnx.export (torch's default exporter,
    torch.export + onnxscript) for this dtype, input rank and weight shape (d_k is a constant of the
    graph): about 1 s an export (measured), so one each; the weights are its initializers."""
    import torch

    class SelfAttention_v1(torch.nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.W_query = torch.nn.Parameter(torch.rand(d_in, d_out))
            self.W_key = torch.nn.Parameter(torch.rand(d_in, d_out))
            self.W_value = torch.nn.Parameter(torch.rand(d_in, d_out))

        def forward(self, x):
            queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
            attn_weights = torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1)
            return attn_weights @ values

    class SelfAttention_v2(torch.nn.Module):
        def __init__(self, d_in, d_out, qkv_bias=False):
            super().__init__()
            self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)

        def forward(self, x):
            queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
            attn_weights = torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1)
            return attn_weights @ values

    rank, w_shape = shapes
    d_in, d_out = w_shape if form == "v1" else w_shape[::-1]
    module = {"v1": SelfAttention_v1, "v2": SelfAttention_v2}[form](d_in, d_out).to(getattr(torch, dtype)).eval()
    # torch's exporter warns about its own internals (FutureWarning from torch.export) and prints its
    # progress; neither is about the module, and a test run treats warnings as errors.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        # optimize=False keeps each parameter an initializer under its own name (optimized, nn.Linear's
        # weight.T is folded into an unnamed constant, which no name could replace).
        # Token and batch axes are symbolic: one export serves every sentence length and batch.
        example = torch.zeros((2,) * (rank - 1) + (d_in,), dtype=getattr(torch, dtype))
        dims = {axis: torch.export.Dim.DYNAMIC for axis in range(rank - 1)}
        program = torch.onnx.export(
            module, (example,), dynamo=True, verbose=False, optimize=False, dynamic_shapes=(dims,)
        )
    return program.model_proto


def _module(form, x, w_query, w_key, w_value):
    """Run the exported module holding these weights: its initializers rewritten by name, as a
    deployer swaps a checkpoint's tensors into an exported graph."""
    x = np.asarray(x)
    exported, names = _exported(form, x.dtype.name, (x.ndim, np.shape(w_query)))
    model = onnx.ModelProto.FromString(exported)
    weights = dict(zip(names, (w_query, w_key, w_value)))
    for initializer in model.graph.initializer:
        if initializer.name in weights:
            initializer.CopyFrom(onnx.numpy_helper.from_array(np.asarray(weights[initializer.name]), initializer.name))
    session = _new_session(model)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def self_attention_v1(x, w_query, w_key, w_value):
    context = _module("v1", x, w_query, w_key, w_value)
    return {"context": context, "context_no_grad": context}  # an exported graph has no gradients to switch off


def self_attention_v2(x, w_query, w_key, w_value):
    return _module("v2", x, w_query, w_key, w_value)


def exercise_3_1(x, w_query, w_key, w_value):
    transposed = (
        np.swapaxes(w, -1, -2) for w in (w_query, w_key, w_value)
    )  # v1's [d_in, d_out] from v2's nn.Linear weights
    return {"context": _module("v1", x, *transposed), "context_v2": _module("v2", x, w_query, w_key, w_value)}


def draw(distribution, n, seed):
    return _run(_draw, distribution, n, seed, dummy=np.zeros(0, np.float32))["sample"]


def initial_weights(d_in, d_out, form, seed):
    return _run(_initial_weights, d_in, d_out, form, seed, dummy=np.zeros(0, np.float32))


def _knobs_removed(g, ranks, d):
    rank = ranks["x"]
    eye = g(
        "EyeLike",
        g(
            "ConstantOfShape",
            g.const([d, d], TensorProto.INT64),
            value=onnx.numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(g.elem))),
        ),
    )

    def attend(q, k, v, scaled):
        scores = g("MatMul", q, g.t(k, rank))
        return g("MatMul", g.scaled_softmax(scores, k) if scaled else g("Softmax", scores, axis=-1), v)

    q = k = v = g("MatMul", "x", eye)
    return {
        "part6": attend("x", "x", "x", False),
        "part6_scaled": attend("x", "x", "x", True),
        "part7_identity": attend(q, k, v, True),
        "part7_identity_unscaled": attend(q, k, v, False),
    }


def knobs_removed(x):
    return _run(_knobs_removed, np.shape(x)[-1], x=x)


# onnxruntime 1.31 implements RandomUniform and RandomNormal at their opset-1 version only (not 22,
# measured: NOT_IMPLEMENTED), so the graphs that draw import opset 21.
def _draw(g, ranks, distribution, n, seed):
    if distribution == "uniform":
        return {"sample": g("RandomUniform", shape=[n], seed=float(seed), dtype=TensorProto.FLOAT)}  # [0, 1) by default
    return {"sample": g("RandomNormal", shape=[n], seed=float(seed), dtype=TensorProto.FLOAT)}


_draw.opset = 21


def _initial_weights(g, ranks, d_in, d_out, form, seed):
    # Three draws, three seeds: a graph's random nodes with one seed would draw the same values.
    if form == "v1":
        draws = [
            g("RandomUniform", shape=[d_in, d_out], seed=float(seed + i), dtype=TensorProto.FLOAT) for i in range(3)
        ]
    else:  # nn.Linear's U(+-1/sqrt(d_in)), in its [d_out, d_in] layout
        bound = float(d_in) ** -0.5
        draws = [
            g(
                "RandomUniform",
                shape=[d_out, d_in],
                low=-bound,
                high=bound,
                seed=float(seed + i),
                dtype=TensorProto.FLOAT,
            )
            for i in range(3)
        ]
    return dict(zip(("w_query", "w_key", "w_value"), draws))


_initial_weights.opset = 21
