"""A decoding step that hides cache positions by its step number, not its absolute position."""

import jax
import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.heads import _offset_causal_mask
from attention_conformance.adapters.jax.shared import _compiled, _masked_weights

EXPECTED = "caught"
MUST_FAIL = ("decode_chunk", "decode_one_token")


@_compiled("start")
def decode_attention(x, w_query, w_key, w_value, start):
    x, w_query, w_key, w_value = map(jnp.asarray, (x, w_query, w_key, w_value))
    keys, values = x @ w_key, x @ w_value
    T = x.shape[-2]
    k_cache = jnp.zeros_like(keys).at[..., :start, :].set(keys[..., :start, :])
    v_cache = jnp.zeros_like(values).at[..., :start, :].set(values[..., :start, :])

    def step(p, carry):
        k_cache, v_cache, out = carry
        token = jax.lax.dynamic_slice_in_dim(x, p, 1, axis=-2)
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, token @ w_key, p, axis=-2)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, token @ w_value, p, axis=-2)
        unwritten = jnp.arange(T) > p - start  # the bug: the step number, not the position
        attended = _masked_weights((token @ w_query) @ jnp.swapaxes(k_cache, -1, -2), k_cache, unwritten) @ v_cache
        return k_cache, v_cache, jax.lax.dynamic_update_slice_in_dim(out, attended, p - start, axis=-2)

    out = jnp.zeros((*x.shape[:-2], T - start, w_value.shape[-1]), x.dtype)
    _, _, stepwise = jax.lax.fori_loop(start, T, step, (k_cache, v_cache, out))
    context = (
        _masked_weights(
            (x[..., start:, :] @ w_query) @ jnp.swapaxes(keys, -1, -2), keys, _offset_causal_mask(T - start, T)
        )
        @ values
    )
    return {"context": context, "stepwise": stepwise}
