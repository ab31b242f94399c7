"""What counts as a spec value: finite numbers float32 holds, regular (never ragged) nested lists of them,
boolean masks, and golden references that stay inside golden/. The loader and every field's validator
ask these questions, so a wrong answer here lets a bad value reach an adapter."""

import pytest
import yaml

from attention_conformance.cases import yaml_values


def test_one_of_answers_false_for_unhashable_yaml_values_instead_of_raising():
    names = {"golden": 1, "exact": 2}
    assert yaml_values.one_of("golden", names)
    # `[1] in names` raises TypeError for a dict; a spec author's list must be refused, not crash the loader.
    assert not yaml_values.one_of(["golden"], names)
    assert not yaml_values.one_of({"golden": 1}, names)
    assert not yaml_values.one_of(1, {1: "an int key"})


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [(0, 0, None, True), (4, 1, 4, True), (5, 1, 4, False), (0, 1, None, False), (-1, 0, None, False)]
    + [(True, 0, None, False), (3.0, 0, None, False), ("3", 0, None, False)],
)
def test_is_int_takes_integers_in_range_and_never_a_bool(value, low, high, expected):
    assert yaml_values.is_int(value, low, high) is expected


def test_is_number_is_exactly_what_float32_holds_finitely():
    largest = yaml_values.FLOAT32_MAX
    assert yaml_values.is_number(largest) and yaml_values.is_number(-largest)
    assert yaml_values.is_number(10**38)  # an int YAML read is compared exactly, never overflowed
    for value in (largest * (1 + 1e-15), 10**39, float("inf"), float("nan"), True, "1.0", None, [1.0]):
        assert not yaml_values.is_number(value), value


def test_yaml_1_1_leaves_an_exponent_without_a_sign_as_text_and_that_text_is_recognised():
    # PyYAML follows YAML 1.1: 2.7e8 is a string, 2.7e+8 a float. The loader's message names the fix.
    unsigned, signed = yaml.safe_load("[2.7e8, 2.7e+8]")
    assert unsigned == "2.7e8" and signed == 2.7e8
    assert yaml_values.is_number_text(unsigned) and not yaml_values.is_number(unsigned)
    assert not yaml_values.is_number_text("sat") and not yaml_values.is_number_text(2.7e8)


def test_numbers_flattens_a_regular_list_and_gives_its_shape():
    assert yaml_values.numbers(1.5) == ([1.5], ())
    assert yaml_values.numbers([[1, 2, 3], [4, 5, 6]]) == ([1, 2, 3, 4, 5, 6], (2, 3))
    assert yaml_values.shape_of([[[0.5]], [[0.25]]]) == (2, 1, 1)


@pytest.mark.parametrize(
    "value",
    [[[1.0], [2.0, 3.0]], [1.0, [2.0]], [], [[]], [1.0, float("nan")], [True, False], "1.0", None],
    ids=["ragged", "mixed_depth", "empty", "empty_row", "nan", "bools", "text", "none"],
)
def test_numbers_refuses_anything_that_is_not_a_regular_list_of_finite_numbers(value):
    assert yaml_values.numbers(value) is None and yaml_values.shape_of(value) is None


def test_bools_takes_a_regular_mask_only():
    assert yaml_values.bools(True)
    assert yaml_values.bools([[True, False], [False, False]])
    for value in ([[True], [True, False]], [True, [False]], [], [[]], [1, 0], [True, 1], "true"):
        assert not yaml_values.bools(value), value


@pytest.mark.parametrize("ref", ["doc000_seed123.json#x", "batched_cube.json#w_query", "doc000_seed123.json#x[2]"])
def test_a_golden_reference_names_a_tensor_of_a_file_inside_golden(ref):
    assert yaml_values.is_golden_ref(ref)


@pytest.mark.parametrize(
    "ref",
    ["../spec/x.json#s", "/etc/passwd#x", "sub/f.json#t", "f.json", "f.json#", "f.json#t[-1]", "F.json#t", "f.json#t\n"]
    + ["f.json#t[1][2]", "f.yaml#t", "f\u00e9.json#t"],
)
def test_anything_else_is_not_a_golden_reference(ref):
    assert not yaml_values.is_golden_ref(ref)
    assert not yaml_values.is_golden_ref(None) and not yaml_values.is_golden_ref(["f.json#t"])
