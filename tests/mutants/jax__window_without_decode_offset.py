"""A sliding window whose band starts at query 0 however many keys are cached: top-left, not bottom-right."""

import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _compiled, _masked_weights

EXPECTED = "caught"
MUST_FAIL = ("window_decode_one_token", "window_decode_chunk")


@_compiled("window", "start")
def window_attention(x, w_query, w_key, w_value, window, start):
    x = jnp.asarray(x)
    keys, values = x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    queries = x[..., start:, :] @ jnp.asarray(w_query)
    p, j = jnp.arange(x.shape[-2] - start)[:, None], jnp.arange(x.shape[-2])  # the bug: no offset by start
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, (j > p) | (j <= p - window))
    return {"weights": weights, "context": weights @ values}
