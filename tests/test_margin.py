"""The one comparison helper (attention_conformance/margin.py): the margin and the worst element of an
output against its expected value, the error each dtype allows, the ULPs a result is told in, and an
adapter's output that is not numbers refused as a Nonconformance, never a crash.
"""

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from attention_conformance.margin import Nonconformance, allowed_error, as_numbers, compare, max_ulps, show, ulps


def test_the_margin_is_the_worst_error_over_its_allowance_and_names_that_element():
    expected = np.zeros((2, 3))
    got = expected.copy()
    got[0, 2], got[1, 1] = 0.5, 0.3  # the larger error, but the larger allowance too
    allowed = np.array([[1.0, 1.0, 1.0], [1.0, 0.1, 1.0]])
    margin, worst, error, limit = compare(got, expected, allowed)
    assert tuple(int(i) for i in worst) == (1, 1)
    assert margin == pytest.approx(3.0) and error == pytest.approx(0.3) and limit == 0.1


def test_an_exact_answer_passes_even_with_no_allowance_and_nan_never_does():
    assert compare([1.0, 2.0], [1.0, 2.0], 0.0)[0] == 0.0
    margin, worst, _, _ = compare([1.0, np.nan], [1.0, 2.0], 1e9)
    assert margin == np.inf and tuple(int(i) for i in worst) == (1,)
    assert compare(np.zeros((0, 3)), np.zeros((0, 3)), 1.0) == (0.0, (0, 0), 0.0, 0.0)
    assert compare(1.5, 1.0, 1.0)[:2] == (0.5, ())


def _tolerance(name, atol, rtol):
    return SimpleNamespace(name=name, bounds=lambda dtype: (atol, rtol))


def test_float32_allows_atol_plus_rtol_times_the_expected_magnitude():
    allowed = allowed_error(None, _tolerance("close", 1e-6, 1e-3), "float32", [-2.0, 0.0, 4.0])
    assert allowed == pytest.approx([1e-6 + 2e-3, 1e-6, 1e-6 + 4e-3])


def test_half_precision_allows_k_times_the_plain_error_plus_ulps_of_the_expected_value():
    spec = SimpleNamespace(tolerances={"low_precision": SimpleNamespace(bounds=lambda dtype: (2.0, 1.0))})
    expected = np.array([1.0, 0.5, 0.0])
    plain = np.array([1.0, 0.5 + 2**-8, 0.0])  # the worst plain error sets the baseline for every element
    allowed = allowed_error(spec, _tolerance("close", 1.0, 1.0), "float16", expected, plain)
    assert allowed == pytest.approx(2 * 2**-8 + np.array([2**-10, 2**-11, 2.0**-24]))
    # An exact tolerance stays exact in half precision too.
    assert list(allowed_error(spec, _tolerance("exact", 0.0, 0.0), "bfloat16", expected, plain)) == [0, 0, 0]


@pytest.mark.parametrize("dtype,step", [("float32", 2**-23), ("float16", 2**-10), ("bfloat16", 2**-7)])
def test_ulps_count_units_of_the_dtype_at_the_expected_value(dtype, step):
    assert ulps(1.0 + 3 * step, 1.0, dtype) == pytest.approx(3.0)
    assert ulps(-8.0 - step * 8, -8.0, dtype) == pytest.approx(1.0)  # the unit grows with the magnitude


def test_max_ulps_counts_in_units_of_the_tensors_largest_value():
    # Per element the 1e-8 entry would be off by a million ULPs; at the tensor's scale it is a tenth of one.
    got, expected = np.array([2e-8, 1.0]), np.array([1e-8, 1.0])
    assert max_ulps(got, expected, "float32") == pytest.approx(1e-8 / 2**-23)
    assert max_ulps(np.zeros(0), np.zeros(0), "float32") == 0.0


@pytest.mark.parametrize(
    "value,says",
    [
        (None, "returned NoneType None"),
        ("0.5", "returned str '0.5'"),
        ({"weights": 1.0}, "returned dict"),
        ([[1.0, 2.0], [3.0]], "returned a list that is not an array of numbers"),
        (np.array([1 + 2j]), "dtype complex128"),
        (np.array(["a"]), "dtype <U1"),
    ],
)
def test_an_output_that_is_not_numbers_is_a_nonconformance_naming_what_it_was(value, says):
    with pytest.raises(Nonconformance, match="^torch weights: ") as info:
        as_numbers("torch weights", value)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_real_numbers_of_any_kind_are_taken_as_given():
    for value in ([1, 2], np.ones(3, bool), np.ones(2, np.float16), np.ones(2, ml_dtypes.bfloat16), 3.5):
        array = as_numbers("out", value)
        assert isinstance(array, np.ndarray) and np.array_equal(array.astype(np.float64), np.asarray(value, float))
    assert show(np.array([[1.0, 2.5]])) == "[[1.0, 2.5]]" and show("x") == "'x'"


def test_the_same_infinity_on_both_sides_hides_no_other_element():
    """inf - inf is NaN, which argmax would pick and `NaN > 1` would pass: the element 5 against 0 must decide."""
    margin, worst, error, _ = compare([np.inf, 5.0], [np.inf, 0.0], 1.0)
    assert (margin, tuple(int(i) for i in worst), error) == (5.0, (1,), 5.0)
