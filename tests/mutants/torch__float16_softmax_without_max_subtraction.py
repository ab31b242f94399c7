"""float16 softmax as exp(s) / sum(exp(s)): exp overflows to inf past 11.09 in float16, and inf / inf is NaN."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
RUN_IN = ("float16",)
MUST_FAIL = ("thermostat_x2000",)


def softmax(scores):
    e = torch.exp(_t(scores))
    return _np(e / e.sum(dim=-1, keepdim=True))
