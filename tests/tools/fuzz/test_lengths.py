"""fuzz at a model's own lengths (attention_conformance/tools/fuzz/lengths.py): the long share is drawn beside each
budget, its first draw is the longest decode, every draw is a valid case within the oracle's stated cost, and a kernel
wrong only past the short draws' lengths is found by it."""

import types

import hypothesis
import numpy as np
from hypothesis import strategies as st

from attention_conformance.adapters import reference
from attention_conformance.cases import input_rules
from attention_conformance.tools.fuzz import cases, lengths, search


def _drawn(op, examples):
    found = []

    @hypothesis.settings(max_examples=examples, database=None, derandomize=True, deadline=None)
    @hypothesis.given(st.data())
    def draw(data):
        found.append(data.draw(lengths.strategy(op))[1])

    draw()
    return found


def test_the_long_share_is_a_fifth_of_the_budget_and_one_at_least_for_the_ops_where_length_matters():
    assert set(lengths.OPS) <= set(cases.COVERED)
    assert [lengths.count("decode_paths", n) for n in (1, 3, 25, 50)] == [1, 1, 5, 10]
    assert lengths.count("masked_attention", 25) == 0


def test_every_long_draw_is_a_valid_case_within_the_oracles_cost():
    decodes = prefills = 0
    for op in ("decode_paths", "sink_decode_paths"):
        for inputs in _drawn(op, 40):
            assert input_rules.problem(op, inputs) is None, inputs
            _, T, _ = inputs["x"]["shape"]
            N, H = inputs["num_heads"], inputs["w_query"]["shape"][1] // inputs["num_heads"]
            if inputs["start"] == 0:
                prefills += 1
                assert T in lengths.QUERIES and T * T * N <= lengths.PREFILL_COST
            else:
                decodes += 1
                assert T in lengths.KEYS and T - 4 <= inputs["start"] < T and T * N * H <= lengths.DECODE_COST
    assert decodes and prefills
    rows = [inputs["scores"]["shape"] for inputs in _drawn("softmax", 20)]
    assert all(shape[-1] in lengths.KEYS and len(shape) in (1, 2) for shape in rows)


def test_a_budget_of_one_long_draw_draws_the_longest_decode():
    found = []

    def decode_paths(**kwargs):
        found.append(kwargs)
        return reference.decode_paths(**kwargs)

    adapter = types.SimpleNamespace(DTYPES=("float64",), decode_paths=decode_paths)
    assert search.Fuzzer("recording", adapter, "float64", ["decode_paths"]).run(1, seed=0, shrink=0) is None
    longest = found[-1]
    assert longest["x"].shape[-2] == max(lengths.KEYS) and longest["start"] == max(lengths.KEYS) - 1


def _past_4096(scores):
    """A softmax whose long-row path leaves the last key out (a last tile of one key skipped): right up to 4096 keys,
    the longest row the short draws hold."""
    scores = np.asarray(scores)
    if scores.shape[-1] <= 4096:
        return reference.softmax(scores)
    weights = np.zeros_like(scores)
    weights[..., :-1] = reference.softmax(scores[..., :-1])
    return weights


def test_a_softmax_wrong_past_the_short_draws_lengths_is_found_by_the_long_share_alone():
    adapter = types.SimpleNamespace(DTYPES=("float64",), softmax=_past_4096)
    fuzzer = search.Fuzzer("wrong_past_4096", adapter, "float64", ["softmax"])
    finding = fuzzer.run(10, seed=0, shrink=0)
    assert finding is not None and finding.failing == ["weights"]
    assert search.generated.shape(finding.inputs["scores"])[-1] > 4096
    assert fuzzer.by_op["softmax"].long == 2 and fuzzer.by_op["softmax"].drawn == 12


def test_a_finding_in_the_budget_stops_the_op_before_its_long_share_and_says_no_long_draw():
    adapter = types.SimpleNamespace(DTYPES=("float64",), softmax=lambda scores: np.zeros_like(np.asarray(scores)))
    fuzzer = search.Fuzzer("zeros", adapter, "float64", ["softmax"])
    assert fuzzer.run(10, seed=0, shrink=0) is not None
    assert fuzzer.by_op["softmax"].long == 0 and fuzzer.by_op["softmax"].drawn == 10
