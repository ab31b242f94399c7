"""PyTorch: rotary position embeddings from torch's own ops, each pairing as its models write it (Meta's Llama with
complex numbers, HF's rotate_half); core torch has no RoPE kernel."""

import math

import torch

from .shared import _np, _split_heads, _t


def _frequencies(rotary_dim, theta, scaling, factor, dtype):
    inv_freq = 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=dtype) / rotary_dim)  # HF's, in float32
    if scaling == "linear":
        return inv_freq / factor
    if scaling == "llama3":  # Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original context 8192
        wavelength = 2 * math.pi / inv_freq
        smooth = (8192 / wavelength - 1) / (4 - 1)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        kept = torch.where(wavelength > 8192, inv_freq / factor, inv_freq)
        return torch.where((wavelength >= 8192 / 4) & (wavelength <= 8192), blended, kept)
    return inv_freq


def _rotate(t, positions, pairing, rotary_dim, theta=10000.0, scaling="none", factor=1.0):
    # Positions and angles in float32 whatever the model's dtype (float64 for a float64 one), as HF keeps them.
    wide = torch.float64 if t.dtype == torch.float64 else torch.float32
    angles = positions.to(wide)[:, None] * _frequencies(rotary_dim, theta, scaling, factor, wide)
    turned, rest = t[..., :rotary_dim], t[..., rotary_dim:]
    if pairing == "interleaved":  # Meta's Llama: each pair a complex number, times e^(i angle)
        pairs = torch.view_as_complex(turned.to(wide).unflatten(-1, (-1, 2)).contiguous())
        turned = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(t.dtype)
    else:  # HF's q * cos + rotate_half(q) * sin, cos and sin repeated over both halves
        cos, sin = (torch.cat([c, c], dim=-1).to(t.dtype) for c in (angles.cos(), angles.sin()))
        half = rotary_dim // 2
        turned = turned * cos + torch.cat([-turned[..., half:], turned[..., :half]], dim=-1) * sin
    return torch.cat([turned, rest], dim=-1)


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _t(x)
    positions = torch.arange(position, position + x.shape[-2])
    return _np(_rotate(x, positions, pairing, rotary_dim, theta, scaling, factor))


def _rotary_context(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ w, num_heads, H) for w in (w_query, w_key, w_value))
    queries = _rotate(queries, torch.arange(T), pairing, rotary_dim)[..., start:, :]
    keys = _rotate(keys, torch.arange(T), pairing, rotary_dim)
    p, j = torch.arange(start, T)[:, None], torch.arange(T)  # query p at its absolute position
    weights = torch.softmax((queries @ keys.mT / H**0.5).masked_fill(j > p, -torch.inf), dim=-1)
    return _np((weights @ values).transpose(-3, -2).flatten(-2))


def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    return _rotary_context(_t(x), _t(w_query), _t(w_key), _t(w_value), num_heads, pairing, rotary_dim, start)


def _pairs_to_halves(w, num_heads, rotary_dim):
    """HF's Llama conversion, in the x @ W layout: in each head, turned columns (2i, 2i+1) become (i, i + R/2)."""
    heads = w.unflatten(-1, (num_heads, -1))
    turned = heads[..., :rotary_dim].unflatten(-1, (-1, 2)).transpose(-1, -2).flatten(-2)
    return torch.cat([turned, heads[..., rotary_dim:]], dim=-1).flatten(-2)


def _halves_to_pairs(w, num_heads, rotary_dim):
    heads = w.unflatten(-1, (num_heads, -1))
    turned = heads[..., :rotary_dim].unflatten(-1, (2, -1)).transpose(-1, -2).flatten(-2)
    return torch.cat([turned, heads[..., rotary_dim:]], dim=-1).flatten(-2)


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    x, w_query, w_key, w_value = _t(x), _t(w_query), _t(w_key), _t(w_value)
    converted = [_pairs_to_halves(w, num_heads, rotary_dim) for w in (w_query, w_key)]
    restored = [_halves_to_pairs(w, num_heads, rotary_dim) for w in converted]

    def context(wq, wk, pairing):
        return _rotary_context(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
