"""k.T on a batch: JAX reverses every axis silently; with B == T == d it still fits."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("row_transposed_matmul_batched_cube",)


def transposed_matmul(q, k):
    return _np(jnp.asarray(q) @ jnp.asarray(k).T)
