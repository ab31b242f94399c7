"""JAX: Llama 4's attention from jax.numpy (the chunked mask on the causal one, the NoPE layers' query temperature, the
weightless L2Norm after RoPE), and the chunks through jax.nn.dot_product_attention's boolean mask."""

import math

import jax
import jax.numpy as jnp

from .bands import _projected
from .rotary import _rotate
from .shared import _compiled, _masked_weights, _split_heads


def _wide(t):  # the norm's and the temperature's dtype: float32 at least, as transformers computes them
    return jnp.float64 if t.dtype == jnp.float64 else jnp.float32


def _hidden(padding, chunk):
    """[B, T, T], True = hidden: causal within chunks counted from each row's first real token, and the padding."""
    T, first = padding.shape[-1], jnp.argmax(~padding, axis=-1)[:, None, None]
    i, j = jnp.arange(T)[:, None] - first, jnp.arange(T)[None, :] - first
    return (j > i) | (j // chunk != i // chunk) | padding[:, None, :]


@_compiled("chunk")
def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = jnp.asarray(padding)
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, _hidden(padding, chunk))
    # A left padding row sees no key: its softmax is 0/0 (NaN), which a where replaces and a product by 0 would keep.
    weights = jnp.where(padding[..., :, None], jnp.zeros((), weights.dtype), weights)
    return {"weights": weights, "context": weights @ values}


@_compiled("chunk", eager_float16=True)
def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    padding = jnp.asarray(padding)
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in _projected(x, w_query, w_key, w_value)),
        mask=~_hidden(padding, chunk)[:, None],  # True = the key takes part
    )[..., 0, :]
    # A padding row that sees no key comes back uniform (jax fills hidden scores with a finite large negative).
    return jnp.where(padding[..., :, None], jnp.zeros((), heads.dtype), heads)


def _l2_norm(t, eps):  # Llama4TextL2Norm: x * rsqrt(mean(x^2) + eps), no weight, cast back
    wide = t.astype(_wide(t))
    return (wide * jax.lax.rsqrt(jnp.mean(jnp.square(wide), axis=-1, keepdims=True) + eps)).astype(t.dtype)


@_compiled("num_heads", "num_kv_heads", "use_rope", "chunk", "floor_scale", "attn_scale", "eps", "start")
def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = jnp.asarray(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    queries = _split_heads(x[..., start:, :] @ jnp.asarray(w_query), num_heads, H)
    keys = _split_heads(x @ jnp.asarray(w_key), num_kv_heads, H)
    values = jnp.repeat(_split_heads(x @ jnp.asarray(w_value), num_kv_heads, H), group, axis=-3)
    positions = jnp.arange(T)  # the queries' are start..T-1
    if use_rope:
        queries = _l2_norm(_rotate(queries, positions[start:], "interleaved", H), eps)
        keys = _l2_norm(_rotate(keys, positions, "interleaved", H), eps)
    elif attn_scale:
        p = positions[start:].astype(_wide(queries))
        scales = jnp.log(jnp.floor((p + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
        queries = (queries * scales[:, None]).astype(queries.dtype)
    i, j = positions[start:, None], positions
    hidden = (j > i) | ((j // chunk != i // chunk) if use_rope and chunk else False)
    scores = queries @ jnp.swapaxes(jnp.repeat(keys, group, axis=-3), -1, -2) / math.sqrt(H)
    context = jnp.swapaxes(jax.nn.softmax(jnp.where(hidden, -jnp.inf, scores), axis=-1) @ values, -3, -2)
    return {"queries": queries, "context": context.reshape(*context.shape[:-2], -1)}
