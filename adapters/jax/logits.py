"""JAX: the scores before the softmax past the documents', soft-capped (Gemma 2's order, as its JAX code) and with
gpt-oss's sinks (a sink column concatenated, softmaxed, then dropped)."""

import math

import jax
import jax.numpy as jnp

from .shared import _causal_mask, _compiled, _split_heads


@_compiled("cap", "causal")
def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(keys.shape[-1])
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        scores = jnp.tanh(scores / cap) * cap
    if causal:
        scores = jnp.where(_causal_mask(x.shape[-2]), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    return {"weights": weights, "context": weights @ values}


@_compiled("num_heads")
def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    scores = jnp.where(mask[:, None], -jnp.inf, queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H))
    sink = jnp.broadcast_to(jnp.asarray(sinks).reshape(num_heads, 1, 1), scores.shape[:-1] + (1,))
    weights = jax.nn.softmax(jnp.concatenate([scores, sink], axis=-1), axis=-1)[..., :-1]
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}
