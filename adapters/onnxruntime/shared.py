"""ONNX Runtime: what the families share: the graph builder, one session per op, dtype and input ranks, the
mapping table's attention as a graph, and the Attention operator on one head.
"""

import functools

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

OPSET = 23  # the first with the standard Attention operator


_ELEM = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "bool": TensorProto.BOOL,
    "int64": TensorProto.INT64,
}


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

    def scaled(self, scores, key):  # scores / sqrt(keys.shape[-1]), the width read as a tensor
        return self("Div", scores, self("Sqrt", self("Cast", self("Shape", key, start=-1), to=self.elem)))

    def scaled_softmax(self, scores, key, mask=None):
        scaled = self.scaled(scores, key)
        if mask is not None:  # True = hidden
            scaled = self("Where", mask, self.const(-np.inf), scaled)
        return self("Softmax", scaled, axis=-1)

    def repeated(self, kv, num_kv_heads, group, like):
        """K/V heads (.., K, S, H) repeated in place to like's (.., K*G, S, H), head n being K/V head n // G (Unsqueeze,
        Expand, Reshape: ONNX has no repeat_interleave)."""
        lead, tail = self("Shape", kv, end=-3), self("Shape", kv, start=-2)
        grown = self("Concat", lead, self.const([num_kv_heads, group], TensorProto.INT64), tail, axis=0)
        expanded = self("Expand", self("Unsqueeze", kv, self.const([-3], TensorProto.INT64)), grown)  # (.., K, G, S, H)
        return self("Reshape", expanded, self("Shape", like))

    def heads(self, t, n, rank):  # (.., T, n*H) -> (.., n, T, H)
        split = self("Reshape", t, self.const([0] * (rank - 1) + [n, -1], TensorProto.INT64))
        return self("Transpose", split, perm=[*range(rank - 2), rank - 1, rank - 2, rank])


# The graph optimisation level sessions are made with: ORT's default, the highest, unless in_mode says otherwise.
_LEVEL = [ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


def _new_session(model):
    options = ort.SessionOptions()
    options.graph_optimization_level = _LEVEL[0]
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@functools.cache
def _session(build, inputs, static, level):
    """One session per builder, (name, dtype, rank) of each input, static settings and optimisation level."""
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
    return _new_session(model), names


def _run(build, *static, **arrays):
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    session, names = _session(build, tuple((k, a.dtype.name, a.ndim) for k, a in arrays.items()), static, _LEVEL[0])
    return dict(zip(names, session.run(names, arrays)))


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


def _batched(x):  # the Attention operator takes [B, N, T, H] (or [B, T, N*H]): a batch of one
    return np.asarray(x)[None] if np.ndim(x) == 2 else np.asarray(x)


def _sdpa(g, ranks, causal=False):
    """The Attention operator on [B, N, T, H] (a mask, if given, broadcast to [B, N, T, S])."""
    return {"context": g("Attention", "q", "k", "v", *(["mask"] if "mask" in ranks else []), is_causal=int(causal))}


def _one_head(x, w):  # [B, 1, T, H]: the projections as one head of the Attention operator
    return (_batched(x) @ np.asarray(w))[:, None]


def _attend_one_head(x, q, k, v, mask=None, causal=False):
    """The Attention operator on one head, its output back in x's layout ([B, T, H] or [T, H])."""
    context = _run(_sdpa, causal, q=q, k=k, v=v, **({} if mask is None else {"mask": mask}))["context"]
    return context[:, 0] if np.ndim(x) == 3 else context[0, 0]
