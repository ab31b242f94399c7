"""The cache handed to ONNX's Attention as present keys, not past_key/past_value: its is_causal then aligns the
band top-left, so the new tokens see only the first keys (the causal_flag divergence, met through a cache)."""

import numpy as np

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.heads import _cached
from attention_conformance.adapters.onnxruntime.shared import _one_head, _run

EXPECTED = "caught"
MUST_FAIL = ("decode_cache_flag_chunk", "decode_cache_flag_one_token")


def cache_flag(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    q = _one_head(x[..., start:, :], w_query)
    context = _run(_cached, q=q, k=_one_head(x, w_key), v=_one_head(x, w_value))["context"]  # the bug: no past
    return context[:, 0] if x.ndim == 3 else context[0, 0]
