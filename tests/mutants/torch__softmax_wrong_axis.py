"""torch.softmax(scores, dim=0): normalises down each column, over queries, instead of over keys."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("row_softmax_binary",)


def softmax(scores):
    return _np(torch.softmax(_t(scores), dim=0))
