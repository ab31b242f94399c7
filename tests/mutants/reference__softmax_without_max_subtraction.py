"""exp(scores) / sum(exp(scores)) as written on paper: overflows to inf / inf = NaN on large scores."""

import numpy as np

from attention_conformance.adapters.reference import *

EXPECTED = "caught"
MUST_FAIL = ("thermostat_x2000",)


def softmax(scores):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(scores, dtype=np.float64))
        return e / e.sum(axis=-1, keepdims=True)
