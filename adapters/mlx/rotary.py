"""MLX: rotary position embeddings from mlx.core's ops (as mlx-lm's reference RoPE writes them) and through its own
kernel, mx.fast.rope (traditional=True is the interleaved pairing)."""

import math

import mlx.core as mx

from .shared import _masked_weights, _mx, _np, _split_heads


def _frequencies(rotary_dim, theta, scaling, factor, dtype):
    inv_freq = 1.0 / mx.power(mx.array(theta, dtype), mx.arange(0, rotary_dim, 2, dtype=dtype) / rotary_dim)
    if scaling == "linear":
        return inv_freq / factor
    if scaling == "llama3":  # Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original context 8192
        wavelength = 2 * math.pi / inv_freq
        smooth = (8192 / wavelength - 1) / (4 - 1)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        kept = mx.where(wavelength > 8192, inv_freq / factor, inv_freq)
        return mx.where((wavelength >= 8192 / 4) & (wavelength <= 8192), blended, kept)
    return inv_freq


def _rotate(t, positions, pairing, rotary_dim, theta=10000.0, scaling="none", factor=1.0):
    # Positions and angles in float32 whatever the model's dtype (float64 for a float64 one).
    wide = mx.float64 if t.dtype == mx.float64 else mx.float32
    angles = positions.astype(wide)[:, None] * _frequencies(rotary_dim, theta, scaling, factor, wide)
    cos, sin = mx.cos(angles).astype(t.dtype), mx.sin(angles).astype(t.dtype)
    turned, rest = t[..., :rotary_dim], t[..., rotary_dim:]
    if pairing == "interleaved":
        first, second = turned[..., 0::2], turned[..., 1::2]
        turned = mx.stack([first * cos - second * sin, first * sin + second * cos], axis=-1).reshape(turned.shape)
    else:
        first, second = turned[..., : rotary_dim // 2], turned[..., rotary_dim // 2 :]
        turned = mx.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)
    return mx.concatenate([turned, rest], axis=-1)


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _mx(x)
    positions = mx.arange(position, position + x.shape[-2])
    return _np(_rotate(x, positions, pairing, rotary_dim, theta, scaling, factor))


def fused_rotary(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _mx(x)
    common = {"traditional": pairing == "interleaved", "offset": position}
    if scaling == "llama3":  # mlx-lm's Llama3RoPE: `freqs` are the scaled frequencies' inverses
        freqs = 1 / _frequencies(rotary_dim, theta, scaling, factor, mx.float32)
        return _np(mx.fast.rope(x, rotary_dim, base=None, scale=1.0, freqs=freqs, **common))
    scale = 1 / factor if scaling == "linear" else 1.0  # linear scaling: positions times 1 / factor
    return _np(mx.fast.rope(x, rotary_dim, base=theta, scale=scale, **common))


def _rotary_context(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    T = x.shape[-2]
    queries, keys, values = (_split_heads(x @ w, num_heads) for w in (w_query, w_key, w_value))
    queries = _rotate(queries, mx.arange(T), pairing, rotary_dim)[..., start:, :]
    keys = _rotate(keys, mx.arange(T), pairing, rotary_dim)
    p, j = mx.arange(start, T)[:, None], mx.arange(T)  # query p at its absolute position
    weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, j > p)
    context = (weights @ values).swapaxes(-3, -2)
    return _np(context.reshape(*context.shape[:-2], -1))


def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    return _rotary_context(_mx(x), _mx(w_query), _mx(w_key), _mx(w_value), num_heads, pairing, rotary_dim, start)


def _permuted(w, num_heads, rotary_dim, pairs):
    """In each head, turned columns (2i, 2i+1) to (i, i + R/2) (HF's Llama conversion), or back."""
    D = w.shape[0]
    heads = w.reshape(D, num_heads, -1)
    grouped = heads[..., :rotary_dim].reshape(D, num_heads, *((-1, 2) if pairs else (2, -1)))
    turned = grouped.swapaxes(-1, -2).reshape(D, num_heads, rotary_dim)
    return mx.concatenate([turned, heads[..., rotary_dim:]], axis=-1).reshape(D, -1)


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    x, w_query, w_key, w_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    converted = [_permuted(w, num_heads, rotary_dim, pairs=True) for w in (w_query, w_key)]
    restored = [_permuted(w, num_heads, rotary_dim, pairs=False) for w in converted]

    def context(wq, wk, pairing):
        return _rotary_context(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
