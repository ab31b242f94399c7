"""Outputs rounded to 3 decimals on the way out, as a careless print-then-parse would."""

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *

EXPECTED = "caught"
MUST_FAIL = ("cat_sat_mat_shapes", "v1_seed123")


def attention(x, w_query, w_key, w_value):
    return {
        name: (value.round(3) if hasattr(value, "round") else value)
        for name, value in base.attention(x, w_query, w_key, w_value).items()
    }


def self_attention_v1(x, w_query, w_key, w_value):
    return {name: value.round(3) for name, value in base.self_attention_v1(x, w_query, w_key, w_value).items()}
