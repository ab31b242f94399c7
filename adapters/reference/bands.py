"""flash-attention's masks past the causal one: a window on both sides of the query (window_size=(left, right)) and
padded queries (query_padding_mask), whose rows it returns as 0."""

import numpy as np

from attention_conformance import bounds

from .heads import _future, masked_attention
from .shared import _bounded


def _band(T, left, right):
    """Key j hidden from query i: before i - left or after i + right (-1: no limit on that side)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return ((j < i - left) if left >= 0 else False) | ((j > i + right) if right >= 0 else False)


def band_attention(x, w_query, w_key, w_value, left, right):
    """A two-sided window (conventions.two_sided_window), not causal: query i sees keys i-left..i+right."""
    T = np.shape(x)[-2]
    return masked_attention(x, w_query, w_key, w_value, np.broadcast_to(_band(T, left, right), (T, T)))


def band_flag(x, w_query, w_key, w_value, left, right):  # what a two-sided window switch must compute
    return band_attention(x, w_query, w_key, w_value, left, right)["context"]


def _zeroed(value, rows):
    if _bounded(value):
        return bounds.Bounded(np.where(rows, 0.0, value.value), np.where(rows, 0.0, value.err))
    return np.where(rows, 0.0, value)


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    """Padded queries (conventions.padded_queries): a padding token hidden as a key from every query, causal or not,
    and its own row 0 (flash-attention's attention_ref). A real query sees its own key, so no real row is empty."""
    padding = np.asarray(padding, dtype=bool)  # [B, T]
    T = padding.shape[-1]
    hidden = padding[..., None, :] | (_future(T) if causal else np.zeros((T, T), bool))
    out = masked_attention(x, w_query, w_key, w_value, hidden)
    return {name: _zeroed(value, padding[..., :, None]) for name, value in out.items()}


def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    return query_padding_attention(x, w_query, w_key, w_value, padding, causal)["context"]
