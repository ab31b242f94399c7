"""The causal mask applied to the weights after the softmax: rows no longer sum to 1."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _causal_mask, _np, _scaled_softmax

EXPECTED = "caught"
MUST_FAIL = ("causal_cat_sat_mat", "causal_batched_cube")


def causal_attention(x, w_query, w_key, w_value):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    attn_weights = _scaled_softmax(queries @ jnp.swapaxes(keys, -1, -2), keys)
    attn_weights = jnp.where(_causal_mask(x.shape[-2]), 0.0, attn_weights)
    return {"weights": _np(attn_weights), "context": _np(attn_weights @ values)}
