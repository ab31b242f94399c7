"""Scores never divided by sqrt(d_k): the thermostat removed."""

import numpy as np

from attention_conformance.adapters.reference import *

EXPECTED = "caught"
MUST_FAIL = ("row_scale_binary",)


def scale(scores, d_k):
    return np.asarray(scores, dtype=np.float64)
