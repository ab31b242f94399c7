"""v2 weight gradients returned in the kernel's [d_in, d_out] layout, not the [d_out, d_in] the weights came in."""

from attention_conformance.adapters import tfjs as base
from attention_conformance.adapters.tfjs import *

EXPECTED = "caught"
MUST_FAIL = ("gradients_v2_binary_square",)  # d_in == d_out: the transposed gradient fits


def gradients(x, w_query, w_key, w_value, g, form):
    grads = base.gradients(x, w_query, w_key, w_value, g, form)
    if form == "v2":
        grads = {k: v.T if k != "grad_x" else v for k, v in grads.items()}
    return grads
