"""RoPE during decoding with the queries turned from position 0: the cache's length not added to the new tokens'
positions (the missing offset of flash-attention#288's rotary with a KV cache)."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.rotary import _rotate
from attention_conformance.adapters.jax.shared import _compiled, _masked_weights, _split_heads

EXPECTED = "caught"
MUST_FAIL = ("rope_attention_decode_one_token", "rope_attention_decode_chunk")


@_compiled("num_heads", "pairing", "rotary_dim", "start")
def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    x = jnp.asarray(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    queries = _rotate(queries[..., start:, :], jnp.arange(T - start), pairing, rotary_dim)  # the bug: from 0
    keys = _rotate(keys, jnp.arange(T), pairing, rotary_dim)
    p, j = jnp.arange(start, T)[:, None], jnp.arange(T)
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, j > p)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return context.reshape(*context.shape[:-2], num_heads * H)
