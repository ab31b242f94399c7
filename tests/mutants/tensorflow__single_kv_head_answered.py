"""Keras's dot_product_attention refuses a single K/V head (InvalidArgumentError, declared as a raise in
spec/divergences/tensorflow.yaml); answered with the oracle's numbers instead: numbers where a raise is declared
fail, right as they are (the declaration is stale)."""

from attention_conformance.adapters import tensorflow as base
from attention_conformance.adapters.tensorflow import *
from tests.mutants._declared_cells import answering_where_it_raises

EXPECTED = "caught"
RUN_ONLY = "the declared raise is a spec case's: fuzz's right numbers on a draw beside it are no finding"
MUST_FAIL = ("gqa_mqa_fused",)

grouped_fused_attention = answering_where_it_raises(base.grouped_fused_attention, "grouped_fused_attention")
