"""A case's inputs as an adapter receives them: tensor data is float32 first (as the documents' tensors are),
then cast to the dtype under test, so every dtype sees the same numbers; scalars and masks pass unchanged;
generated tensors are the same draws on every call and no caller can change them."""

import ml_dtypes
import numpy as np
import pytest

from attention_conformance.cases import golden, inputs, loader

GOLDENS = golden.Goldens()


def test_a_spec_number_is_rounded_to_float32_before_any_dtype():
    # Without the float32 step, float64 would see 0.1 exactly and float32 a different number.
    wide = inputs.resolve([[0.1, 1 / 3]], "float64", GOLDENS)
    assert wide.dtype == np.float64 and wide[0, 0] == float(np.float32(0.1)) != 0.1
    assert np.array_equal(wide, inputs.resolve([[0.1, 1 / 3]], "float32", GOLDENS).astype(np.float64))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_golden_and_filled_tensors_arrive_in_the_dtype_under_test(dtype):
    scores = inputs.resolve("doc000_thermostat.json#s", dtype, GOLDENS)
    expected = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    assert scores.dtype == expected and scores.shape == (5,)
    assert np.array_equal(scores, GOLDENS.tensor("doc000_thermostat.json#s").astype(expected))
    filled = inputs.resolve({"fill": 0.5, "shape": [2, 3]}, dtype, GOLDENS)
    assert filled.dtype == expected and filled.shape == (2, 3) and (filled == 0.5).all()


def test_a_uniform_input_is_the_seeded_pcg64_draw_in_float32():
    value = {"uniform": [-1, 1], "shape": [4, 3], "seed": 7}
    drawn = inputs.resolve(value, "float64", GOLDENS)
    expected = np.random.default_rng(7).uniform(-1, 1, (4, 3)).astype(np.float32)
    assert drawn.dtype == np.float64 and np.array_equal(drawn, expected.astype(np.float64))
    assert not np.array_equal(drawn, inputs.resolve(value | {"seed": 8}, "float64", GOLDENS))


def test_a_draw_is_made_once_and_is_read_only():
    first = inputs.generated(3, -1.0, 1.0, (2, 2))
    assert inputs.generated(3, -1.0, 1.0, (2, 2)) is first
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 0.0
    resolved = inputs.resolve({"uniform": [-1.0, 1.0], "shape": [2, 2], "seed": 3}, "float32", GOLDENS)
    resolved[0, 0] = 0.0  # the adapter's copy is its own: the cached draw is unchanged
    assert first[0, 0] != 0.0


@pytest.mark.parametrize("value", [3, 0.125, "v1", True, False])
def test_scalars_and_words_stay_python_values(value):
    resolved = inputs.resolve(value, "float16", GOLDENS)
    assert resolved == value and type(resolved) is type(value)


def test_a_mask_stays_boolean_in_every_dtype():
    mask = inputs.resolve([[True, False], [False, False]], "bfloat16", GOLDENS)
    assert mask.dtype == bool and mask.tolist() == [[True, False], [False, False]]


def test_resolve_all_gives_every_parameter_of_a_spec_case():
    case = loader.load().cases["padding_fully_masked"]
    given = inputs.resolve_all(case, "float16", GOLDENS)
    assert set(given) == set(case.inputs)
    assert given["x"].dtype == np.float16 and given["mask"].dtype == bool and given["mask"][0].all()
    assert given["x"].shape == GOLDENS.tensor(case.inputs["x"]).shape
