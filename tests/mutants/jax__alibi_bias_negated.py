"""ALiBi's distance written i - j: a past key's bias grows with its distance, so each query leans on the keys farthest
from it (explain names it: "the bias negated")."""

import math

import jax
import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.logits import _alibi_slopes
from attention_conformance.adapters.jax.shared import _causal_mask, _compiled, _split_heads

EXPECTED = "caught"
MUST_FAIL = ("alibi_eight_heads_causal", "alibi_twelve_heads_causal", "alibi_three_heads", "alibi_long_sequence")


@_compiled("num_heads", "causal")
def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    positions = jnp.arange(T)
    bias = (_alibi_slopes(num_heads, x.dtype)[:, None, None] * (positions[:, None] - positions)).astype(x.dtype)  # bug
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H) + bias
    if causal:
        scores = jnp.where(_causal_mask(T), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"weights": weights, "context": context.reshape(*context.shape[:-2], -1)}
