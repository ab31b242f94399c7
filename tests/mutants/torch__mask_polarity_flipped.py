"""The suite's mask (True = hidden) handed to F.scaled_dot_product_attention, whose True means "attend"."""

import torch.nn.functional as F

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("mask_padding_bool", "mask_padding_causal_bool")


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    if api != "bool":
        return base.mask_conventions(x, w_query, w_key, w_value, mask, api, fill)
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    return _np(F.scaled_dot_product_attention(queries, keys, values, attn_mask=_t(mask)))
