"""Heads packed as the inner axis ([B, T, H, N] flattened, head n at columns n, n + N, ..) where the 3-D Attention
operator reads [B, T, N, H]: every head mixes the others' dims."""

import numpy as np

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.heads import _packed
from attention_conformance.adapters.onnxruntime.shared import _run

EXPECTED = "caught"
MUST_FAIL = ("packed_gqa_causal", "packed_mqa_causal")


def _inner(w, n):  # the bug: columns regrouped head-minor
    D, width = np.shape(w)
    return np.asarray(w).reshape(D, width // n, n).swapaxes(-1, -2).reshape(D, width)


def packed_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    arrays = {"x": x, "w_query": _inner(w_query, num_heads), "w_key": _inner(w_key, num_kv_heads)}
    arrays["w_value"] = _inner(w_value, num_kv_heads)
    context = _run(_packed, num_heads, num_kv_heads, bool(causal), **arrays)["context"]
    return context.reshape(*context.shape[:-1], num_heads, -1).swapaxes(-1, -2).reshape(context.shape)
