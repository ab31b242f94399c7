"""MPT's bidirectional ALiBi, -m |i - j| (llm-foundry's build_alibi_bias with full=True), where the suite's bias is
m (j - i) (conventions.alibi): the same under the causal mask, a later key penalised where it should be favoured
without it. The other side of a convention, so only the case that states it catches it."""

import numpy as np
from onnx import TensorProto

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.logits import _alibi_heads, _alibi_slopes, _merged
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
MUST_FAIL = ("alibi_flag_three_heads",)


def _symmetric_sdpa(g, ranks, num_heads, causal):
    query, key, value = _alibi_heads(g, ranks, num_heads)
    slopes = g("Reshape", _alibi_slopes(g, num_heads), g.const([num_heads, 1, 1], TensorProto.INT64))
    distance = g("Neg", g("Abs", g("CastLike", "distance", slopes)))  # the bug: -|i - j|
    bias = g("Cast", g("Mul", slopes, distance), to=g.elem)
    context = g("Attention", query, key, value, bias, is_causal=int(causal))
    return {"context": _merged(g, context, ranks["x"])}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    T = np.shape(x)[-2]
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    distance = np.arange(T)[None, :] - np.arange(T)[:, None]
    return _run(_symmetric_sdpa, int(num_heads), bool(causal), **arrays, distance=distance)["context"]
