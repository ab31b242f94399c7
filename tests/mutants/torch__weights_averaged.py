"""nn.MultiheadAttention's default average_attn_weights=True, its (B, T, S) average repeated for every head."""

import numpy as np

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *

EXPECTED = "caught"
MUST_FAIL = ("layer_mha_small", "layer_port_from_torch")


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    averaged = "mha_averaged" if layer == "mha" else layer
    out = base.attention_module(
        x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, averaged, checkpoint
    )
    if layer == "mha":
        out["weights"] = np.repeat(out["weights"][:, None], num_heads, axis=1)
    return out
