"""The issue-61 families' draws (attention_conformance/tools/fuzz/families.py): every family op is covered, T5's
sequences stop short of a tie, and a packed row is one row cut where its tokens end, as the loader asks."""

import hypothesis
import numpy as np
from hypothesis import strategies as st

from attention_conformance.adapters.reference.cross import _t5_ties
from attention_conformance.cases import input_rules, input_values
from attention_conformance.tools.fuzz import cases, families


def _drawn(op, examples):
    found = []

    @hypothesis.settings(max_examples=examples, database=None, derandomize=True)
    @hypothesis.given(st.data())
    def draw(data):
        found.append(data.draw(cases.strategy([op]))[1])

    draw()
    return found


def _shape(value):
    return value["shape"] if isinstance(value, dict) else list(np.shape(value))


def test_every_family_op_is_drawn_by_the_fuzzer():
    assert set(families.OPS) <= set(cases.COVERED)


def test_t5_draws_keep_their_distances_short_of_the_first_tie():
    for inputs in _drawn("t5_attention", 60):
        T = _shape(inputs["x"])[-2]
        assert not _t5_ties(inputs["num_buckets"], inputs["max_distance"], inputs["bidirectional"], T - 1)


def test_a_packed_row_is_one_row_cut_where_its_tokens_end_and_most_hold_several_documents():
    drawn = _drawn("varlen_flag", 60)
    for inputs in drawn:
        assert input_values.offsets(inputs["cu_seqlens"]), inputs["cu_seqlens"]
        assert _shape(inputs["x"])[:2] == [1, inputs["cu_seqlens"][-1]]
        assert input_rules.problem("varlen_flag", inputs) is None
    several = sum(len(inputs["cu_seqlens"]) > 2 for inputs in drawn)
    assert several >= len(drawn) // 2, f"{several} of {len(drawn)} rows hold two documents or more"
