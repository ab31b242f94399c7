"""JAX: rotary position embeddings from jax.numpy, rotate_half as Gemma's apply_rope writes it and interleaved as
pairs of a reshaped axis; JAX has no RoPE kernel."""

import math

import jax.numpy as jnp

from .shared import _compiled, _masked_weights, _split_heads


def _frequencies(rotary_dim, theta, scaling, factor, dtype):
    inv_freq = 1.0 / theta ** (jnp.arange(0, rotary_dim, 2, dtype=dtype) / rotary_dim)
    if scaling == "linear":
        return inv_freq / factor
    if scaling == "llama3":  # Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original context 8192
        wavelength = 2 * math.pi / inv_freq
        smooth = (8192 / wavelength - 1) / (4 - 1)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        kept = jnp.where(wavelength > 8192, inv_freq / factor, inv_freq)
        return jnp.where((wavelength >= 8192 / 4) & (wavelength <= 8192), blended, kept)
    return inv_freq


def _rotate(t, positions, pairing, rotary_dim, theta=10000.0, scaling="none", factor=1.0):
    # Positions and angles in float32 whatever the model's dtype (float64 for a float64 one).
    wide = jnp.float64 if t.dtype == jnp.float64 else jnp.float32
    angles = positions.astype(wide)[:, None] * _frequencies(rotary_dim, theta, scaling, factor, wide)
    cos, sin = jnp.cos(angles).astype(t.dtype), jnp.sin(angles).astype(t.dtype)
    turned, rest = t[..., :rotary_dim], t[..., rotary_dim:]
    if pairing == "interleaved":
        pairs = turned.reshape(*turned.shape[:-1], -1, 2)
        first, second = pairs[..., 0], pairs[..., 1]
        turned = jnp.stack([first * cos - second * sin, second * cos + first * sin], axis=-1).reshape(turned.shape)
    else:
        first, second = jnp.split(turned, 2, axis=-1)
        turned = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return jnp.concatenate([turned, rest], axis=-1)


@_compiled("pairing", "rotary_dim", "theta", "position", "scaling", "factor")
def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = jnp.asarray(x)
    positions = jnp.arange(position, position + x.shape[-2])
    return _rotate(x, positions, pairing, rotary_dim, theta, scaling, factor)


def _rotary_context(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    queries = _rotate(queries, jnp.arange(T), pairing, rotary_dim)[..., start:, :]
    keys = _rotate(keys, jnp.arange(T), pairing, rotary_dim)
    p, j = jnp.arange(start, T)[:, None], jnp.arange(T)  # query p at its absolute position
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, j > p)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return context.reshape(*context.shape[:-2], num_heads * H)


@_compiled("num_heads", "pairing", "rotary_dim", "start")
def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    return _rotary_context(jnp.asarray(x), w_query, w_key, w_value, num_heads, pairing, rotary_dim, start)


def _permuted(w, num_heads, rotary_dim, pairs):
    """In each head, turned columns (2i, 2i+1) to (i, i + R/2) (HF's Llama conversion), or back."""
    heads = w.reshape(w.shape[0], num_heads, -1)
    grouped = heads[..., :rotary_dim].reshape(w.shape[0], num_heads, *((-1, 2) if pairs else (2, -1)))
    turned = jnp.swapaxes(grouped, -1, -2).reshape(w.shape[0], num_heads, rotary_dim)
    return jnp.concatenate([turned, heads[..., rotary_dim:]], axis=-1).reshape(w.shape)


@_compiled("num_heads", "rotary_dim", "start")
def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    x, w_query, w_key = jnp.asarray(x), jnp.asarray(w_query), jnp.asarray(w_key)
    converted = [_permuted(w, num_heads, rotary_dim, pairs=True) for w in (w_query, w_key)]
    restored = [_permuted(w, num_heads, rotary_dim, pairs=False) for w in converted]

    def context(wq, wk, pairing):
        return _rotary_context(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
