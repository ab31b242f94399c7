"""masked_fill with a large float16 fill, which torch refuses (RuntimeError, declared as a raise in
spec/divergences/torch.yaml), answered with the oracle's numbers instead: numbers where a raise is declared fail,
right as they are (the declaration is stale)."""

from attention_conformance.adapters import torch as base
from attention_conformance.adapters.torch import *
from tests.mutants._declared_cells import answering_where_it_raises

EXPECTED = "caught"
RUN_ONLY = "the declared raise is a spec case's: fuzz's right numbers on a draw beside it are no finding"
RUN_IN = ("float16",)
MUST_FAIL = ("mask_additive_large",)

mask_conventions = answering_where_it_raises(base.mask_conventions, "mask_conventions")
