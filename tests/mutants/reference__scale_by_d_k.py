"""Scores divided by d_k instead of sqrt(d_k)."""

import numpy as np

from attention_conformance.adapters.reference import *

EXPECTED = "caught"
MUST_FAIL = ("row_scale_binary",)


def scale(scores, d_k):
    return np.asarray(scores, dtype=np.float64) / d_k
