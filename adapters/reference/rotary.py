"""Rotary position embeddings (RoPE; RoFormer, arXiv:2104.09864, eq. 34; spec conventions.rotary): both layouts, a
partial rotation, scaled frequencies, positions offset by a cache, attention with it and a checkpoint ported between
the layouts."""

import contextlib
from decimal import Decimal, localcontext

import numpy as np

from attention_conformance import bounds, deterministic, elementary

from .documents import project
from .heads import _future, _masked_head
from .shared import _bounded, _f64, _zeros

# Llama 3.1's rope_scaling (its config.json): frequencies whose wavelength passes 8192 / 1 tokens are divided by
# `factor`, those below 8192 / 4 kept, and those between blended.
_LLAMA3_LOW, _LLAMA3_HIGH, _LLAMA3_ORIGINAL = 1.0, 4.0, 8192.0
THETA = 10000.0  # the attention ops' base: RoFormer's, Llama 2's


def _frequencies(rotary_dim, theta, scaling, factor, like):
    """f_i = theta ** (-2i/R) for the R/2 pairs, decimal arithmetic to float64's last bit (the same bytes on every
    machine), then scaled; with a bound, as a framework computes them (elementary.power)."""
    exponents = np.arange(0, rotary_dim, 2) / rotary_dim
    with localcontext() as exact:
        exact.prec = 40
        base = Decimal(theta)
        f = np.array([float(base ** (Decimal(-2 * i) / rotary_dim)) for i in range(rotary_dim // 2)])
    wavelength = 2 * np.pi / f  # which of llama3's three rules a pair takes: decided on the exact values
    if _bounded(like):
        f = elementary.power(f, theta, exponents)
    if scaling == "linear":  # HF's rope_type "linear": every position divided by the factor
        return f / factor
    if scaling != "llama3":
        return f
    smooth = (_LLAMA3_ORIGINAL * f / (2 * np.pi) - _LLAMA3_LOW) / (_LLAMA3_HIGH - _LLAMA3_LOW)
    rules = (
        (wavelength < _LLAMA3_ORIGINAL / _LLAMA3_HIGH, f),
        (wavelength > _LLAMA3_ORIGINAL / _LLAMA3_LOW, f / factor),
        (np.ones(f.shape, dtype=bool), (1 - smooth) * f / factor + smooth * f),
    )
    scaled, taken = _zeros(f.shape, f), np.zeros(f.shape, dtype=bool)
    for chosen, value in rules:
        scaled[chosen & ~taken] = value[chosen & ~taken]
        taken |= chosen
    return scaled


def _cos_sin(positions, rotary_dim, theta, scaling, factor, like):
    """cos and sin of position x frequency, (T, R/2): computed in float32 at least (bounds.in_float32_at_least),
    stored in the dtype, as HF's rotary embedding casts them to the model's."""
    with bounds.in_float32_at_least() if _bounded(like) else contextlib.nullcontext():
        angles = positions[:, None] * _frequencies(rotary_dim, theta, scaling, factor, like)
        cos, sin = elementary.cos_sin(angles) if _bounded(angles) else deterministic.cos_sin(angles)
    return _f64(cos, sin)


def _rotated(t, cos, sin, pairing, rotary_dim):
    """Pair (a, b) turned by each angle, (a cos - b sin, a sin + b cos): pairs (2i, 2i+1) "interleaved", (i, i+R/2)
    "rotate_half"; dims R.. as they are."""
    (t,) = _f64(t)
    R = rotary_dim
    a, b = (t[..., 0:R:2], t[..., 1:R:2]) if pairing == "interleaved" else (t[..., : R // 2], t[..., R // 2 : R])
    a_cos, b_sin, a_sin, b_cos = _f64(a * cos, b * sin, a * sin, b * cos)  # each product stored, as written
    first, second = a_cos - b_sin, a_sin + b_cos
    if pairing == "interleaved":
        turned = np.reshape(np.stack([first, second], axis=-1), np.shape(a)[:-1] + (R,))
    else:
        turned = np.concatenate([first, second], axis=-1)
    return np.concatenate([turned, t[..., R:]], axis=-1)


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    """x's rows are the tokens at positions position, position + 1, ..; its last axis is one head."""
    (x,) = _f64(x)
    cos, sin = _cos_sin(np.arange(position, position + np.shape(x)[-2]), rotary_dim, theta, scaling, factor, x)
    return _rotated(x, cos, sin, pairing, rotary_dim)


def fused_rotary(x, pairing, rotary_dim, theta, position, scaling, factor):
    return rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor)


def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
    """Causal attention, each head's queries and keys rotated at their positions (theta 10000): the queries
    start..T-1 over all T keys, as decoding with a cache computes them; context is the heads concatenated."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    cos, sin = _cos_sin(np.arange(T), rotary_dim, THETA, "none", 1.0, x)
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    heads = []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        q = _rotated(queries[..., columns], cos, sin, pairing, rotary_dim)[..., start:, :]
        k = _rotated(keys[..., columns], cos, sin, pairing, rotary_dim)
        heads.append(_masked_head(q, k, values[..., columns], _future(T, start=start))[1])
    return np.concatenate(heads, axis=-1)


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    """A checkpoint trained with interleaved pairs: run as it is, converted to rotate-half (its query and key
    columns permuted in each head) and converted back, the context is the same."""
    context = rotary_attention(x, w_query, w_key, w_value, num_heads, "interleaved", rotary_dim, start)
    return {"interleaved": context, "converted": context, "restored": context}
