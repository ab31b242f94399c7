"""ONNX Runtime, the deployment path: the documents' attention written as ONNX graphs in the mapping
table's own terms (MatMul, Transpose with perm on the last two axes, Div by Sqrt(d_k), Softmax
axis -1), the standard Attention operator (opset 23) for the fused paths, and the PyTorch
document's SelfAttention_v1/_v2 modules exported with torch.onnx.export; every graph runs in
onnxruntime's CPU execution provider.

Added the way an outside adapter is: the template, this file and one tox environment; its known
divergences are data, in spec/divergences/<adapter>.yaml. Graphs are built with the onnx helper API, once
per op, dtype and input ranks (sizes stay symbolic), and their sessions reused: a session costs
milliseconds to create.
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
import onnxruntime as ort
from onnx import TensorProto, helper

from attention_conformance import cache

DTYPES = ("float32", "float64", "float16")
_NO_TRAINING = (
    "onnxruntime is an inference runtime: it computes no gradients, and onnxruntime-training (the training "
    "build) stopped at 1.19.2 (2024-09), with no release for this runtime or Python 3.11 wheels beside it"
)
NOT_APPLICABLE = {
    "bfloat16": (
        "onnxruntime 1.31's CPU execution provider has no bfloat16 kernel for MatMul, Div, Where or ReduceMax "
        "(measured: NOT_IMPLEMENTED)"
    ),
    "gradients": _NO_TRAINING,
    "sgd_step": _NO_TRAINING,
    "create_parameter": (
        "ONNX has no trainable parameter: an initializer is a constant to onnxruntime "
        "(the draw itself is the `draw` cases')"
    ),
    "parameters": "ONNX has no trainable parameter: an initializer is a constant to onnxruntime",
    "attention_module": (
        "ONNX has no attention layer holding weights: its Attention operator takes projected Q, K and V "
        "(the fused cases)"
    ),
    "layer_mask": (
        "ONNX has no attention layer holding weights: its Attention operator's attn_mask is the mask_conventions cases'"
    ),
    "layer_key_padding": "ONNX has no attention layer holding weights, so no key-padding argument",
    "grouped_attention_layer": (
        "ONNX has no attention layer holding weights: its Attention operator's fewer K/V heads are "
        "grouped_fused_attention's"
    ),
    "layer_defaults": "ONNX has no attention layer, so no constructor defaults",
}
OPSET = 23  # the first with the standard Attention operator
_ELEM = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "bool": TensorProto.BOOL,
    "int64": TensorProto.INT64,
}


def version():
    return f"onnxruntime {ort.__version__} (onnx {onnx.__version__}, opset {OPSET})"


class _Graph:
    """Nodes appended in order, each output a fresh name: a builder reads like the code it replaces."""

    def __init__(self, elem):
        self.elem, self.nodes = elem, []

    def __call__(self, op, *inputs, outputs=1, **attrs):
        names = [f"{op}_{len(self.nodes)}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def const(self, value, elem=None):
        array = np.asarray(value, dtype=helper.tensor_dtype_to_np_dtype(elem or self.elem))
        return self("Constant", value=onnx.numpy_helper.from_array(array))

    def t(self, a, rank):  # Transpose with perm on the last two axes: the mapping table's tf.transpose(K)
        return self("Transpose", a, perm=[*range(rank - 2), rank - 1, rank - 2])

    def scaled_softmax(self, scores, key, mask=None):
        d_k = self("Cast", self("Shape", key, start=-1), to=self.elem)  # keys.shape[-1], as a tensor
        scaled = self("Div", scores, self("Sqrt", d_k))
        if mask is not None:  # True = hidden
            scaled = self("Where", mask, self.const(-np.inf), scaled)
        return self("Softmax", scaled, axis=-1)

    def heads(self, t, n, rank):  # (.., T, n*H) -> (.., n, T, H)
        split = self("Reshape", t, self.const([0] * (rank - 1) + [n, -1], TensorProto.INT64))
        return self("Transpose", split, perm=[*range(rank - 2), rank - 1, rank - 2, rank])


@functools.cache
def _session(build, inputs, static):
    """One session per builder, (name, dtype, rank) of each input, and static settings."""
    elem = next(_ELEM[d] for _, d, _ in inputs if d.startswith("float"))
    g = _Graph(elem)
    outputs = build(g, {name: rank for name, _, rank in inputs}, *static)
    names = list(outputs)
    g.nodes += [helper.make_node("Identity", [value], [name]) for name, value in outputs.items()]
    graph = helper.make_graph(
        g.nodes,
        build.__name__,
        [helper.make_tensor_value_info(n, _ELEM[d], [None] * r) for n, d, r in inputs],
        [helper.make_tensor_value_info(n, elem, None) for n in names],
    )  # every output is in the inputs' dtype
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", getattr(build, "opset", OPSET))], ir_version=10
    )
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]), names


def _run(build, *static, **arrays):
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    session, names = _session(build, tuple((k, a.dtype.name, a.ndim) for k, a in arrays.items()), static)
    return dict(zip(names, session.run(names, arrays)))


# --- the mapping-table rows -------------------------------------------------


def create_parameter(d_in, d_out, seed):
    raise NotImplementedError(NOT_APPLICABLE["create_parameter"])


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


# --- the whole pipeline and the module forms ---------------------------------


def _attention(g, ranks):
    query, key, value = (g("MatMul", "x", w) for w in ("w_query", "w_key", "w_value"))
    scores = g("MatMul", query, g.t(key, ranks["x"]))
    weights = g.scaled_softmax(scores, key, "mask" if "mask" in ranks else None)
    return {
        "query": query,
        "key": key,
        "value": value,
        "scores": scores,
        "weights": weights,
        "context": g("MatMul", weights, value),
    }


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
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
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


def parameters(d_in, d_out, form):
    raise NotImplementedError(NOT_APPLICABLE["parameters"])


# --- masks, dropout and heads ---------------------------------------------------


def masked_attention(x, w_query, w_key, w_value, mask):
    out = _run(_attention, x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=np.asarray(mask, dtype=bool))
    return {"weights": out["weights"], "context": out["context"]}


def _causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p; above that diagonal is the future.
    return np.triu(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)


def causal_attention(x, w_query, w_key, w_value):
    T = np.shape(x)[-2]
    return masked_attention(x, w_query, w_key, w_value, _causal_mask(T, T))


def _batched(x):  # the Attention operator takes [B, N, T, H] (or [B, T, N*H]): a batch of one
    return np.asarray(x)[None] if np.ndim(x) == 2 else np.asarray(x)


def _fused(g, ranks, num_heads, num_kv_heads, causal):
    """The standard Attention operator on [B, N, T, H] heads; K/V may have fewer heads (grouped)."""
    query = g.heads(g("MatMul", "x", "w_query"), num_heads, ranks["x"])
    key, value = (g.heads(g("MatMul", "x", w), num_kv_heads, ranks["x"]) for w in ("w_key", "w_value"))
    return {"heads": g("Attention", query, key, value, is_causal=int(causal))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    return grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_heads, causal)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    heads = _run(_fused, num_heads, num_kv_heads, causal, x=_batched(x), w_query=w_query, w_key=w_key, w_value=w_value)[
        "heads"
    ]
    return heads[0] if np.ndim(x) == 2 else heads


def _grouped(g, ranks, num_heads, num_kv_heads):
    """Heads by Reshape and Transpose; each K/V head repeated in place (Unsqueeze, Expand, Reshape:
    ONNX has no repeat_interleave)."""
    group = num_heads // num_kv_heads
    query = g.heads(g("MatMul", "x", "w_query"), num_heads, ranks["x"])
    shape = g("Shape", query)  # (.., N, T, H)

    def repeated(w):
        kv = g.heads(g("MatMul", "x", w), num_kv_heads, ranks["x"])  # (.., K, T, H)
        lead = g("Shape", kv, end=-3)
        tail = g("Shape", kv, start=-2)
        grown = g("Concat", lead, g.const([num_kv_heads, group], TensorProto.INT64), tail, axis=0)
        expanded = g("Expand", g("Unsqueeze", kv, g.const([-3], TensorProto.INT64)), grown)  # (.., K, G, T, H)
        return g("Reshape", expanded, shape)  # (.., K*G, T, H): head n is K/V head n // G

    key, value = repeated("w_key"), repeated("w_value")
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, ranks["x"] + 1)), key, "mask")
    return {"heads": g("MatMul", weights, value)}


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    T = np.shape(x)[-2]
    hidden = _causal_mask(T, T) if causal else np.zeros((T, T), dtype=bool)
    return _run(_grouped, num_heads, num_kv_heads, x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=hidden)[
        "heads"
    ]


def _sdpa(g, ranks, causal=False):
    """The Attention operator on [B, N, T, H] (a mask, if given, broadcast to [B, N, T, S])."""
    return {"context": g("Attention", "q", "k", "v", *(["mask"] if "mask" in ranks else []), is_causal=int(causal))}


def _one_head(x, w):  # [B, 1, T, H]: the projections as one head of the Attention operator
    return (_batched(x) @ np.asarray(w))[:, None]


def _attend_one_head(x, q, k, v, mask=None, causal=False):
    """The Attention operator on one head, its output back in x's layout ([B, T, H] or [T, H])."""
    context = _run(_sdpa, causal, q=q, k=k, v=v, **({} if mask is None else {"mask": mask}))["context"]
    return context[:, 0] if np.ndim(x) == 3 else context[0, 0]


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    hidden = np.asarray(mask, dtype=bool)
    hidden = hidden[:, None] if hidden.ndim == 3 else hidden  # [B, 1, T, S]: every head
    dtype = np.asarray(x).dtype
    if api == "bool":  # the Attention operator's boolean mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # a float mask added to the scores
        value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": np.finfo(dtype).min}[fill]
        attn_mask = np.where(hidden, value, 0).astype(dtype)
    return _attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)), mask=attn_mask)


# --- decoding: queries start..T-1 over a cache of keys 0..T-1 -----------------------------------


def _decode_step(g, ranks):
    """One token with a KV cache, as a deployed decoder runs: past keys and values in, the new
    token's appended (Concat), present keys and values out for the next step; no mask, the future
    is not in the cache yet."""
    key = g("Concat", "past_key", g("MatMul", "token", "w_key"), axis=-2)
    value = g("Concat", "past_value", g("MatMul", "token", "w_value"), axis=-2)
    scores = g("MatMul", g("MatMul", "token", "w_query"), g.t(key, ranks["token"]))
    return {"context": g("MatMul", g.scaled_softmax(scores, key), value), "present_key": key, "present_value": value}


def _decode(g, ranks):
    key, value = g("MatMul", "x", "w_key"), g("MatMul", "x", "w_value")
    scores = g("MatMul", g("MatMul", "queries", "w_query"), g.t(key, ranks["x"]))
    return {"context": g("MatMul", g.scaled_softmax(scores, key, "mask"), value)}


def decode_attention(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    T = x.shape[-2]
    out = _run(
        _decode,
        x=x,
        queries=x[..., start:, :],
        w_query=w_query,
        w_key=w_key,
        w_value=w_value,
        mask=_causal_mask(T - start, T),
    )
    prefix = x[..., :start, :]  # the prompt: its keys and values fill the cache, computed by the runtime too
    past = {"past_key": project(prefix, w_key), "past_value": project(prefix, w_value)}
    steps = []
    for p in range(start, T):
        step = _run(_decode_step, token=x[..., p : p + 1, :], w_query=w_query, w_key=w_key, w_value=w_value, **past)
        past = {"past_key": step["present_key"], "past_value": step["present_value"]}
        steps.append(step["context"])
    return {"context": out["context"], "stepwise": np.concatenate(steps, axis=-2)}


def causal_flag(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    return _attend_one_head(
        x, _one_head(x[..., start:, :], w_query), _one_head(x, w_key), _one_head(x, w_value), causal=True
    )


def _dropout(g, ranks, p, seed):
    ratio, training = g.const(p), g.const(True, TensorProto.BOOL)
    return {
        "dropout_eval": g("Dropout", "weights", ratio, seed=seed),  # training_mode defaults to False
        "dropout_train": g("Dropout", "weights", ratio, training, seed=seed),
    }


def dropout(weights, p, seed):
    return _run(_dropout, p, seed, weights=weights)


def _multi_head(g, ranks, num_heads):
    rank = ranks["x"]
    query, key, value = (g.heads(g("MatMul", "x", w), num_heads, rank) for w in ("w_query", "w_key", "w_value"))
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, rank + 1)), key, "mask")
    heads = g("MatMul", weights, value)  # (.., N, T, H)
    merged = g(
        "Reshape",
        g("Transpose", heads, perm=[*range(rank - 2), rank - 1, rank - 2, rank]),
        g.const([0] * (rank - 1) + [-1], TensorProto.INT64),
    )  # (.., T, N*H)
    return {"heads": heads, "context": g("MatMul", merged, "w_out")}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    T = np.shape(x)[-2]
    hidden = _causal_mask(T, T) if causal else np.zeros((T, T), dtype=bool)
    return _run(_multi_head, num_heads, x=x, w_query=w_query, w_key=w_key, w_value=w_value, w_out=w_out, mask=hidden)


def attention_layer(x, w_query, w_key, w_value):
    """The Attention operator fed the projections (one head): ONNX's own scaled dot-product attention."""
    return _attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)))


# --- what the documents say about initialisation and the knobs ---------------------


def _draw(g, ranks, distribution, n, seed):
    if distribution == "uniform":
        return {"sample": g("RandomUniform", shape=[n], seed=float(seed), dtype=TensorProto.FLOAT)}  # [0, 1) by default
    return {"sample": g("RandomNormal", shape=[n], seed=float(seed), dtype=TensorProto.FLOAT)}


# onnxruntime 1.31 implements RandomUniform and RandomNormal at their opset-1 version only (not 22,
# measured: NOT_IMPLEMENTED), so the graphs that draw import opset 21.
_draw.opset = 21


def draw(distribution, n, seed):
    return _run(_draw, distribution, n, seed, dummy=np.zeros(0, np.float32))["sample"]


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


# --- training ------------------------------------------------------------------


def gradients(x, w_query, w_key, w_value, g, form):
    raise NotImplementedError(NOT_APPLICABLE["gradients"])


def sgd_step(x, w_query, w_key, w_value, g, lr):
    raise NotImplementedError(NOT_APPLICABLE["sgd_step"])
