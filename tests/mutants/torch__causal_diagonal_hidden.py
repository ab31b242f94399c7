"""torch.triu(..., diagonal=0): the mask also hides each token from itself."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np

EXPECTED = "caught"
MUST_FAIL = ("causal_cat_sat_mat", "causal_first_token")


def causal_attention(x, w_query, w_key, w_value):
    T = x.shape[-2]
    return masked_attention(x, w_query, w_key, w_value, _np(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)))
