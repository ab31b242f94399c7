"""Only the kernels ported into keras.layers.MultiHeadAttention: every bias left at its zero initialisation."""

import numpy as np

from attention_conformance import ports
from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.layers import _layer_outputs

EXPECTED = "caught"
MUST_FAIL = ("layer_mha_small", "layer_port_from_torch")


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = ports.as_saved_by(checkpoint, weights, ports.layer_layout(layer, "keras"), num_heads)
    state = {k: np.zeros_like(v) if k.endswith("bias") else v for k, v in state.items()}
    return _layer_outputs(x, state, num_heads, causal, layer)
