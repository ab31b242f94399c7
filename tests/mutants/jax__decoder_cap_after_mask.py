"""A decoder that caps after its window and causal mask (onnx#7867's order): a hidden key's -inf becomes -cap, and
e^-cap of probability leaks to it: with a cap of 5, not with Gemma 2's 50 (e^-50 is below float32's resolution)."""

import math

import jax
import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.rotary import _rotate
from attention_conformance.adapters.jax.shared import _compiled, _split_heads

EXPECTED = "caught"
MUST_FAIL = ("decoder_mqa_interleaved",)


@_compiled("num_heads", "num_kv_heads", "pairing", "window", "cap")
def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = jnp.asarray(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = jnp.arange(T)
    queries = _rotate(_split_heads(x @ jnp.asarray(w_query), num_heads, H), positions, pairing, H)
    keys = jnp.repeat(_rotate(_split_heads(x @ jnp.asarray(w_key), num_kv_heads, H), positions, pairing, H), group, -3)
    values = jnp.repeat(_split_heads(x @ jnp.asarray(w_value), num_kv_heads, H), group, axis=-3)
    i, j = positions[:, None], positions
    scores = jnp.where((j > i) | (j <= i - window), -jnp.inf, queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(H))
    if cap:  # the bug: after the mask
        scores = jnp.tanh(scores / cap) * cap
    sink = jnp.broadcast_to(jnp.asarray(sinks).reshape(num_heads, 1, 1), scores.shape[:-1] + (1,))
    weights = jax.nn.softmax(jnp.concatenate([scores, sink], axis=-1), axis=-1)[..., :-1]
    context = jnp.swapaxes(weights @ values, -3, -2)
    return context.reshape(*context.shape[:-2], -1)
