"""Padding handed to nn.MultiheadAttention's key_padding_mask as "True = a real token", Keras's
value_mask polarity; torch's True means "ignore this key"."""

import torch

from attention_conformance import ports
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.layers import _mha
from attention_conformance.adapters.torch.shared import _causal_mask, _np, _t

EXPECTED = "caught"
MUST_FAIL = ("mask_layer_key_padding", "mask_layer_key_padding_causal")


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _mha(ports.to_layout("torch", weights, num_heads), num_heads, True, _t(x).dtype)
    x = _t(x)
    with torch.no_grad():
        context, _ = mha(
            x,
            x,
            x,
            key_padding_mask=~_t(padding),
            need_weights=False,
            attn_mask=_causal_mask(x.shape[-2]) if causal else None,
        )
    return _np(context)
