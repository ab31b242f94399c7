"""The exported module run as exported: its initializers keep the weights it was exported with (a
random init), not the checkpoint's. No error anywhere; every number is wrong."""

import numpy as np
import onnxruntime as ort

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.documents import _exported

EXPECTED = "caught"
MUST_FAIL = ("v1_seed123", "v1_batched_cube")


def self_attention_v1(x, w_query, w_key, w_value):
    x = np.asarray(x)
    exported, _ = _exported("v1", x.dtype.name, (x.ndim, np.shape(w_query)))
    session = ort.InferenceSession(exported, providers=["CPUExecutionProvider"])
    context = session.run(None, {session.get_inputs()[0].name: x})[0]
    return {"context": context, "context_no_grad": context}
