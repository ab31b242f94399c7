"""The document's keys.T on a batch: reverses every axis, which fits when B == T == d."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("row_transposed_matmul_batched_cube",)


def transposed_matmul(q, k):
    return _np(_t(q) @ _t(k).T)
