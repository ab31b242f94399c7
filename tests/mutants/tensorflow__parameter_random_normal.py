"""The mapping table's right-hand column taken literally: tf.randomNormal where torch.rand is uniform."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("row_parameter",)


def create_parameter(d_in, d_out, seed):
    parameter = tf.Variable(tf.random.Generator.from_seed(seed).normal([d_in, d_out]))
    return {"parameter": _np(parameter), "trainable": parameter.trainable}
