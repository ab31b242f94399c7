"""tf.transpose(k) on a batch reverses every axis, silently; with B == T == d it still fits."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("row_transposed_matmul_batched_cube",)


def transposed_matmul(q, k):
    return _np(tf.linalg.matmul(_t(q), tf.transpose(_t(k))))
