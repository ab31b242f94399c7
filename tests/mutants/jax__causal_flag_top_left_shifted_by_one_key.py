"""The causal flag over fewer queries than keys aligned top left (the side jax declares, flag_causal_top_left or
attention_causal_top_left) but one key off: query i of the block sees keys 0..i+1. Excused while a convention
excused any result; judged on its declared side, it fails."""

from attention_conformance.adapters import jax as base
from attention_conformance.adapters.jax import *
from tests.mutants._declared_cells import top_left_shifted_by_one_key

EXPECTED = "caught"
MUST_FAIL = ("decode_flag_chunk", "decode_flag_one_token")

causal_flag = top_left_shifted_by_one_key(base.causal_flag)
