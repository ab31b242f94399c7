"""W_query and W_key swapped: scores come out transposed, and nothing errors."""

from attention_conformance.adapters import jax as base
from attention_conformance.adapters.jax import *

EXPECTED = "caught"
MUST_FAIL = ("sat", "binary", "batched_cube")


def attention(x, w_query, w_key, w_value):
    return base.attention(x, w_key, w_query, w_value)
