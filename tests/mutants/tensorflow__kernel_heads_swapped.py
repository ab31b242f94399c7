"""Keras query/key/value kernels reshaped [E, head_dim, N] and transposed to fit [E, N, head_dim]."""

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
    if layer == "mha":
        E = w_query.shape[0]
        for name in ("query", "key", "value"):
            state[f"{name}/kernel"] = weights[f"w_{name}"].reshape(E, E // num_heads, num_heads).transpose(0, 2, 1)
    return _layer_outputs(x, state, num_heads, causal, layer)
