"""The suite's mask (True = hidden) handed to mx.fast.scaled_dot_product_attention, whose True means "attend"."""

from attention_conformance.adapters import mlx as base
from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.heads import _sdpa
from attention_conformance.adapters.mlx.shared import _heads, _mx, _np

EXPECTED = "caught"
MUST_FAIL = ("mask_padding_bool", "mask_padding_causal_bool")


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    if api != "bool":
        return base.mask_conventions(x, w_query, w_key, w_value, mask, api, fill)
    x, hidden = _mx(x), _mx(mask)
    queries, keys, values = (_heads(x @ _mx(w), 1) for w in (w_query, w_key, w_value))
    attn_mask = hidden[:, None] if hidden.ndim == 3 else hidden
    return _np(_sdpa(queries, keys, values, attn_mask, x.ndim == 2)[..., 0, :, :])
