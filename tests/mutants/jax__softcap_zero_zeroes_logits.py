"""A cap of 0 applied as written, 0 x tanh(s / 0): every logit 0 and every row uniform, where ONNX and
FlashAttention read 0 as no cap (Megatron-LM#6590)."""

import math

import jax
import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _causal_mask, _compiled

EXPECTED = "caught"
MUST_FAIL = ("softcap_zero_disables",)


@_compiled("cap", "causal")
def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(keys.shape[-1])
    scores = jnp.nan_to_num(jnp.tanh(scores / cap) * cap)  # the bug: no `if cap`
    if causal:
        scores = jnp.where(_causal_mask(x.shape[-2]), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    return {"weights": weights, "context": weights @ values}
