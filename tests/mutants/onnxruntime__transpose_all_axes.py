"""Transpose with no perm (ONNX's default reverses every axis): right for one sentence, wrong for a batch,
the ONNX form of `keys.T` on a 3-D tensor."""

from attention_conformance.adapters import onnxruntime as base
from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
MUST_FAIL = ("batched_cube", "row_transposed_matmul_batched_cube")


def _all_axes(g, ranks):
    return {"scores": g("MatMul", "q", g("Transpose", "k"))}


def transposed_matmul(q, k):
    return _run(_all_axes, q=q, k=k)["scores"]


def _attention_all_axes(g, ranks):
    query, key, value = (g("MatMul", "x", w) for w in ("w_query", "w_key", "w_value"))
    scores = g("MatMul", query, g("Transpose", key))
    weights = g.scaled_softmax(scores, key)
    return {
        "query": query,
        "key": key,
        "value": value,
        "scores": scores,
        "weights": weights,
        "context": g("MatMul", weights, value),
    }


def attention(x, w_query, w_key, w_value):
    return _run(_attention_all_axes, x=x, w_query=w_query, w_key=w_key, w_value=w_value) | {
        "d_k": base.np.shape(w_key)[-1]
    }
