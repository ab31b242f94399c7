"""The mapping table's right-hand column as written: tf.variable(tf.randomNormal([dIn, dOut]))."""

from attention_conformance.adapters.tfjs import *
from attention_conformance.adapters.tfjs import _call

EXPECTED = "caught"
MUST_FAIL = ("row_parameter",)


def create_parameter(d_in, d_out, seed):
    sample = _call("draw", distribution="normal", n=d_in * d_out, seed=seed)
    return {"parameter": sample.reshape(d_in, d_out), "trainable": True}
