"""Exercise 3.1 copying nn.Linear's [d_out, d_in] weight into v1 without the .T."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.documents import SelfAttention_v1, _v2
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("exercise_3_1_binary_square",)  # 3x2 weights fail by shape; square ones by value


def exercise_3_1(x, w_query, w_key, w_value):
    sa_v2 = _v2(w_query, w_key, w_value)
    d_out, d_in = w_query.shape
    sa_v1 = SelfAttention_v1(d_in, d_out)
    sa_v1.W_query.data = sa_v2.W_query.weight.clone()
    sa_v1.W_key.data = sa_v2.W_key.weight.clone()
    sa_v1.W_value.data = sa_v2.W_value.weight.clone()
    return {"context": _np(sa_v1(_t(x))), "context_v2": _np(sa_v2(_t(x)))}
