"""nn.Linear's [d_out, d_in] weights used as Dense kernels [d_in, d_out] without the transpose."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("v2_binary_square",)  # with d_in == d_out the kernel fits and is silently wrong


def self_attention_v2(x, w_query, w_key, w_value):
    weights = (("W_query", w_query), ("W_key", w_key), ("W_value", w_value))
    params = {name: {"kernel": jnp.asarray(w)} for name, w in weights}
    return _np(self_attention_v2_apply(params, jnp.asarray(x)))
