"""The fields of an expectation, each declared once: the validator the loader runs on its value (which may
blame another field), and the verifier that holds an output to it. The verifiers are called here as
run/verify.py calls them, `FIELDS[name].verify(subject)`, on a small hand-made subject."""

import types

import numpy as np
import pytest

from attention_conformance.cases import fields, loader
from attention_conformance.margin import Nonconformance

CTX = types.SimpleNamespace(outputs=("weights", "context"), documents={"000": "doc.txt"}, tolerances={"golden": None})


class Subject:
    """What verify.Subject gives a verifier: the numbers got, the expectation, the dtype, how to fail."""

    def __init__(self, got, dtype="float32", **given):
        self.got = np.asarray(got)
        self.exp = loader.Expectation("weights", tuple(given), **given)
        self.dtype, self.spec, self.low = dtype, types.SimpleNamespace(documents={}), False
        self.tol, self.plain_out, self.kept = types.SimpleNamespace(name="golden"), None, None

    def fail(self, message):
        raise Nonconformance(message)

    def allowed(self, expected, plain=None):
        return np.full(np.shape(expected), 1e-6)

    def element(self, index):
        return [int(i) for i in index]

    def keep(self, index, got, expected, error, allowed, tol_text, origin):
        self.kept = {"element": self.element(index), "got": float(got), "expected": float(expected)}


def verify(name, got, **given):
    return fields.FIELDS[name].verify(Subject(got, **given))


def test_the_registry_says_which_fields_verify_and_which_are_compared_with_computed_values():
    qualifiers = {name for name, f in fields.FIELDS.items() if f.verify is None}
    assert qualifiers == {"row", "decimals", "tolerance", "source", "note"}
    # The dtype sweep repeats exactly these (plan.applies); a printed number stays a float32 statement.
    assert {name for name, f in fields.FIELDS.items() if f.computed} == {"golden", "reference", "same_as", "row_sums"}
    assert [name for name, f in fields.FIELDS.items() if f.always] == ["reference"]
    assert set(loader.Expectation.__dataclass_fields__) == {"output", "given", *fields.FIELDS}


@pytest.mark.parametrize(
    ("raw", "blamed", "fragment"),
    [
        ({"printed": [0.5]}, "decimals", "how many decimals"),
        ({"printed": [0.26894], "decimals": 4}, "printed", "0.26894 has more than the 4 decimals"),
        ({"printed": [0.2689], "decimals": 4}, "source", "says where it came from"),
        ({"decimals": 4}, "decimals", "`printed` value"),
        ({"check_dtype": False}, "check_dtype", "only `true`"),
        ({"same_as": "scores"}, "same_as", "'scores' is not an output of this op ['weights', 'context']"),
        ({"zero_fraction": {"value": 0.5, "bound": 0.1}}, "zero_fraction", "reason: why that bound"),
        ({"in_range": [0, 1, 2]}, "in_range", "low <= value < high"),
        ({"golden": "f.json#t", "tolerance": "loose"}, "tolerance", "'loose' is not defined"),
        ({"equals": [[True], [True, False]]}, "equals", "regular list"),
    ],
)
def test_validate_names_the_field_to_fix(raw, blamed, fragment):
    field, problem = fields.validate(raw, CTX)
    assert field == blamed and fragment in problem, (field, problem)


def test_a_valid_expectation_validates():
    raw = {"printed": [0.2689], "decimals": 4, "source": {"doc": "000", "quote": "a line"}, "row_sums": 1.0}
    assert fields.validate(raw, CTX) is None


def test_upper_triangle_zero_names_the_first_leaked_element_however_small():
    causal = np.tril(np.full((2, 3, 3), 0.5, np.float32))
    assert verify("upper_triangle_zero", causal, upper_triangle_zero=True) is None
    causal[1, 0, 2] = 2.0**-100  # a clipped softmax's leftover: still a later key seen
    with pytest.raises(Nonconformance, match=r"element \[1, 0, 2\] above the diagonal is 7\.88\d*e-31"):
        verify("upper_triangle_zero", causal, upper_triangle_zero=True)


@pytest.mark.parametrize(("value", "conforms"), [(0.999, True), (1.0, False), (-1e-9, False), (np.nan, False)])
def test_in_range_is_low_inclusive_high_exclusive_and_nan_fails(value, conforms):
    got = np.array([0.0, 0.5, value], np.float32)
    if conforms:
        assert verify("in_range", got, in_range=[0, 1]) is None
    else:
        with pytest.raises(Nonconformance, match="should lie in"):
            verify("in_range", got, in_range=[0, 1])


def test_statistics_hold_to_their_bound_and_nan_never_passes():
    stat = {"value": 0.5, "bound": 0.1, "reason": "dropout p = 0.5"}
    assert verify("zero_fraction", [0.0, 2.0, 0.0, 2.0], zero_fraction=stat) is None
    with pytest.raises(Nonconformance, match="1.00000 of the elements are zero but should be 0.5"):
        verify("zero_fraction", [0.0, 0.0, 0.0, 0.0], zero_fraction=stat)
    assert verify("mean", [0.45, 0.55], mean=stat) is None
    with pytest.raises(Nonconformance, match="mean nan"):
        verify("mean", [0.5, np.nan], mean=stat)


def test_exact_facts_compare_shape_dtype_and_every_value():
    assert verify("equals", [[True, False]], equals=[[True, False]]) is None
    with pytest.raises(Nonconformance, match="should be exactly"):
        verify("equals", [True, False], equals=[[True, False]])  # same values, another shape
    with pytest.raises(Nonconformance, match="dtype float64 but should be float32"):
        verify("check_dtype", np.zeros(2, np.float64), check_dtype=True)
    with pytest.raises(Nonconformance, match=r"shape \[3, 2\] but should be \[2, 3\] \(no document source\)"):
        verify("shape", np.zeros((3, 2)), shape=[2, 3])


def test_row_sums_returns_its_margin_and_names_the_row_that_misses():
    subject = Subject([[0.25, 0.75], [0.5, 0.5 + 4e-7]], row_sums=1.0)
    margin, ulp = fields.FIELDS["row_sums"].verify(subject)
    assert 0.3 < margin < 0.5 and ulp == 0.0  # 4e-7 of the 1e-6 allowed
    assert subject.kept["element"] == [1] and subject.kept["expected"] == 1.0
    with pytest.raises(Nonconformance, match=r"row \[0\] sums to 0\.875 but should sum to 1\.0"):
        verify("row_sums", [[0.25, 0.625], [0.5, 0.5]], row_sums=1.0)


def test_nonzero_values_judges_the_kept_elements_only():
    assert verify("nonzero_values", [0.0, 2.0, 0.0, 2.0], nonzero_values=2.0) == (0.0, 0.0)
    with pytest.raises(Nonconformance, match="a kept element is 1.5"):
        verify("nonzero_values", [0.0, 2.0, 1.5], nonzero_values=2.0)
    with pytest.raises(Nonconformance, match="every element is zero"):
        verify("nonzero_values", [0.0, 0.0], nonzero_values=2.0)
