"""Token by token from an empty cache: the prompt's keys and values (positions 0..start-1) forgotten."""

import tensorflow as tf

from attention_conformance.adapters import tensorflow as base
from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _matmul, _np, _scaled_softmax, _t

EXPECTED = "caught"
MUST_FAIL = ("decode_chunk", "decode_one_token")


def decode_attention(x, w_query, w_key, w_value, start):
    context = base.decode_attention(x, w_query, w_key, w_value, start)["context"]
    x = _t(x)
    k_cache = v_cache = None
    steps = []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k, v = _matmul(token, _t(w_key)), _matmul(token, _t(w_value))
        k_cache = k if k_cache is None else tf.concat([k_cache, k], axis=-2)
        v_cache = v if v_cache is None else tf.concat([v_cache, v], axis=-2)
        step = _scaled_softmax(tf.linalg.matmul(_matmul(token, _t(w_query)), k_cache, transpose_b=True), k_cache)
        steps.append(tf.linalg.matmul(step, v_cache))
    return {"context": context, "stepwise": _np(tf.concat(steps, axis=-2))}
