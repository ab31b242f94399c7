"""torch's [B, N, T, H] handed straight to jax.nn.dot_product_attention, which reads [B, T, N, H]."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("fused_four_heads_causal_batched",)


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads

    def split(t):  # (.., N, T, H), as torch's scaled_dot_product_attention wants
        return jnp.swapaxes(t.reshape(*t.shape[:-1], num_heads, head_dim), -3, -2)

    queries, keys, values = (split(x @ jnp.asarray(w)) for w in (w_query, w_key, w_value))
    return _np(jax.nn.dot_product_attention(queries, keys, values, is_causal=causal))
