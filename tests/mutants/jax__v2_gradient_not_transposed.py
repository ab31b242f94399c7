"""v2's kernel gradients returned in Dense's [d_in, d_out] layout, not the weights' nn.Linear one."""

from attention_conformance.adapters import jax as base
from attention_conformance.adapters.jax import *

EXPECTED = "caught"
MUST_FAIL = ("gradients_v2_binary_square",)  # d_in == d_out: the wrong layout fits


def gradients(x, w_query, w_key, w_value, g, form):
    out = base.gradients(x, w_query, w_key, w_value, g, form)
    if form == "v2":
        out |= {k: v.T for k, v in out.items() if k != "grad_x"}
    return out
