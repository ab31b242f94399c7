"""ONNX Runtime's float64 Attention refuses a causal float mask (Fail, declared as a raise in
spec/divergences/onnxruntime.yaml); answered with the oracle's numbers instead: numbers where a raise is declared
fail, right as they are (the declaration is stale)."""

from attention_conformance.adapters import onnxruntime as base
from attention_conformance.adapters.onnxruntime import *
from tests.mutants._declared_cells import answering_where_it_raises

EXPECTED = "caught"
RUN_ONLY = "the declared raise is a spec case's: fuzz's right numbers on a draw beside it are no finding"
RUN_IN = ("float64",)
MUST_FAIL = ("alibi_flag_eight_heads_causal",)

alibi_flag = answering_where_it_raises(base.alibi_flag, "alibi_flag")
