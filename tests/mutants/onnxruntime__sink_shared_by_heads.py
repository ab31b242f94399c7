"""One sink for every head: head 0's logit broadcast where gpt-oss learns one a head."""

import numpy as np

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.logits import _sinks
from attention_conformance.adapters.onnxruntime.shared import _batched, _run

EXPECTED = "caught"
MUST_FAIL = ("sink_two_heads", "sink_dominant")


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    shared = np.full_like(np.asarray(sinks), np.asarray(sinks)[0])  # the bug: head 0's sink everywhere
    arrays = {"x": _batched(x), "w_query": w_query, "w_key": w_key, "w_value": w_value}
    out = _run(_sinks, num_heads, **arrays, sinks=shared, mask=np.asarray(mask, dtype=bool))
    return {"weights": out["weights"], "context": out["context"]}
