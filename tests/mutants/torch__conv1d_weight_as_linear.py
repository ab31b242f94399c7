"""GPT-2's c_proj.weight (Conv1D, [in, out]) copied into out_proj.weight (nn.Linear, [out, in]) untransposed.

Square, so it loads without a shape error; c_attn's [E, 3E] would not, so only c_proj goes wrong.
"""

from attention_conformance import ports
from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.layers import _layer_outputs

EXPECTED = "caught"
MUST_FAIL = ("layer_port_from_gpt2", "layer_mha_gpt2_small_heads_causal")


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = ports.as_saved_by(checkpoint, weights, ports.layer_layout(layer, "torch"), num_heads)
    if checkpoint == "gpt2" and layer != "gpt2":
        state["out_proj.weight"] = ports.to_layout("gpt2", weights, num_heads)["c_proj.weight"]
    return _layer_outputs(x, state, num_heads, causal, layer)
