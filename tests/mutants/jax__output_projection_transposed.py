"""Flax's out/kernel [N, head_dim, E] made from W_out transposed (the [out, in] habit of nn.Linear)."""

from attention_conformance import ports
from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.layers import _layer_outputs

EXPECTED = "caught"
MUST_FAIL = ("layer_mha_small", "layer_port_from_flax")


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = ports.as_saved_by(checkpoint, weights, ports.layer_layout(layer, "flax"), num_heads)
    if layer == "mha":
        E = w_out.shape[0]
        state["out/kernel"] = w_out.T.reshape(num_heads, E // num_heads, E)
    return _layer_outputs(x, state, num_heads, causal, layer)
