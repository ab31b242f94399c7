"""Dropout that zeroes weights but forgets to scale the survivors by 1 / (1 - p)."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("dropout_p10", "dropout_p50")


def dropout(weights, p, seed):
    weights = _t(weights)
    kept = tf.random.stateless_uniform(weights.shape, seed=[seed, 0]) >= p
    return {"dropout_eval": _np(weights), "dropout_train": _np(tf.where(kept, weights, 0.0))}
