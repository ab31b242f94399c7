"""input_rules.problem: what an op asks of its inputs together, each rule refused with its field named and each
spec case of the repository let through (the loader adds the file and the case, tests/cases/test_loader.py)."""

import pytest

from attention_conformance.cases import input_rules, loader

W = {"uniform": [-1, 1], "seed": 1}


def _x_w(width, kv_width=None):
    return {
        "x": {**W, "shape": [1, 2, 4]},
        "w_query": {**W, "shape": [4, width]},
        "w_key": {**W, "shape": [4, kv_width or width]},
        "w_value": {**W, "shape": [4, kv_width or width]},
    }


DECODER = {"num_heads": 2, "num_kv_heads": 1, "pairing": "rotate_half", "window": 2, "cap": 0.0, "sinks": [0.0, 0.0]}
REFUSED = {
    "heads_not_dividing": ("grouped_attention", {**_x_w(6), "num_heads": 4, "num_kv_heads": 1}, "inputs.num_heads"),
    "kv_heads_not_dividing": ("grouped_attention", {**_x_w(6), "num_heads": 3, "num_kv_heads": 2}, "num_kv_heads"),
    "key_not_kv_heads_wide": ("grouped_attention", {**_x_w(8, 6), "num_heads": 2, "num_kv_heads": 1}, "w_key"),
    "decoder_odd_head": ("decoder_attention", {**_x_w(6, 3), **DECODER}, "heads of 3 dims"),
    "padding_first": ("key_padding_flag", {**_x_w(4), "padding": [[True, False]]}, "inputs.padding"),
    "padding_between": ("key_padding_flag", {**_x_w(4), "padding": [[False, True, False]]}, "inputs.padding"),
    "no_real_key": ("key_padding_flag", {**_x_w(4), "padding": [[False, False], [True, True]]}, "inputs.padding"),
    "packed_batch_of_two": (
        "varlen_attention",
        {**_x_w(4), "x": {**W, "shape": [2, 2, 4]}, "num_heads": 2, "cu_seqlens": [0, 2], "causal": True},
        "one row [1, T, D]",
    ),
    "packed_cuts_short": (
        "varlen_flag",
        {**_x_w(4), "num_heads": 2, "cu_seqlens": [0, 1], "causal": True},
        "inputs.cu_seqlens",
    ),
    "packed_odd_head": (
        "varlen_attention",
        {**_x_w(6), "num_heads": 2, "cu_seqlens": [0, 2], "causal": False},
        "3 dims",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_rule_broken_is_named_by_its_field(name):
    op, inputs, fragment = REFUSED[name]
    problem = input_rules.problem(op, inputs)
    assert problem and problem.startswith("field 'inputs.") and fragment in problem, problem


def test_inputs_that_keep_the_rules_pass():
    assert input_rules.problem("decoder_attention", {**_x_w(8, 4), **DECODER}) is None
    assert input_rules.problem("key_padding_flag", {**_x_w(4), "padding": [[False, True], [False, False]]}) is None
    assert input_rules.problem("layer_key_padding", {"padding": [[True, False]]}) is None  # a layer takes any padding


def test_every_case_of_the_repositorys_spec_keeps_the_rules():
    assert all(input_rules.problem(c.op, c.inputs) is None for c in loader.load().cases.values())
