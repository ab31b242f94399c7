"""nn.MultiheadAttention's in_proj_weight packed [k, q, v] instead of [q, k, v] (and its bias alike)."""

import numpy as np

from attention_conformance import ports
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.layers import _layer_outputs

EXPECTED = "caught"
MUST_FAIL = ("layer_mha_small", "layer_port_from_keras")


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = ports.as_saved_by(checkpoint, weights, ports.layer_layout(layer, "torch"), num_heads)
    if layer != "gpt2":
        for name in ("in_proj_weight", "in_proj_bias"):
            q, k, v = np.split(state[name], 3)
            state[name] = np.concatenate([k, q, v])
    return _layer_outputs(x, state, num_heads, causal, layer)
