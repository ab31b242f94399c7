"""What a declared divergence does to a test (run/verify.py: judged), kind by kind: a precision judges a float64
result at float32's accuracy (a float32 computation passes, a 1% error fails), a raise passes the declared exception
alone (another, or numbers returned, fail), a convention or a bug is left to the strict expected failure; and the
entries that say so are read, refused and matched as facts (cases/divergences.py); a run refuses a test two facts
cover, and fails a pattern that matches nothing and a precision no test needed (run/declarations.py)."""

import types

import numpy as np
import pytest
import yaml

from attention_conformance.adapters import reference
from attention_conformance.cases import divergences, golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.run import calls, declarations, verify

SPEC = loader.load()
GOLDENS = golden.Goldens()
CASE = SPEC.cases["causal_cat_sat_mat"]  # causal attention on the document's six tokens, judged by the oracle


pytestmark = pytest.mark.usefixtures("fresh_oracle")


def _adapter(change=lambda out: out, inside="float32"):
    """causal_attention computed wholly in `inside` from float64 inputs, results returned in float64."""

    def causal_attention(**given):
        narrowed = {k: np.asarray(v).astype(inside) if isinstance(v, np.ndarray) else v for k, v in given.items()}
        with reference.rounding_to(np.dtype(inside)):
            found = reference.causal_attention(**narrowed)
        return {k: change(np.asarray(v, dtype=np.float64)) for k, v in found.items()}

    return types.SimpleNamespace(DTYPES=("float64",), causal_attention=causal_attention)


def _fact(text):
    return divergences.parse(yaml.safe_load(text), "test: entry 'the_fact'", fact="the_fact", source="test")


def _judged(adapter, divergence, output="context"):
    return verify.judged(SPEC, "mine", adapter, CASE, output, "float64", GOLDENS, divergence)


FLOAT32 = "kind: precision\ncomputed_in: float32\nreason: float64 computed in float32 inside\n"


def test_a_float64_result_computed_in_float32_fails_at_float64_and_passes_at_the_declared_float32():
    with pytest.raises(Nonconformance):
        verify.verify(SPEC, "mine", _adapter(), CASE, "context", "float64", GOLDENS)
    margin, _, worst, declared = _judged(_adapter(), _fact(FLOAT32))
    assert margin <= 1 and declared == {
        "kind": "precision",
        "fact": "the_fact",
        "source": "test",
        "judged_at": "float32 accuracy",
        "needed": True,
        "bounded": True,
    }
    assert "at float32 accuracy as 'the_fact' declares" in worst["tolerance"]


def test_a_one_percent_error_fails_the_declared_precision_too():
    with pytest.raises(Nonconformance, match="at float32 accuracy as 'the_fact' declares"):
        _judged(_adapter(lambda out: out * 1.01), _fact(FLOAT32))


def test_a_result_that_conforms_at_its_own_dtype_says_it_did_not_need_the_declaration():
    exact = types.SimpleNamespace(DTYPES=("float64",), causal_attention=reference.causal_attention)
    assert _judged(exact, _fact(FLOAT32))[3]["needed"] is False


def test_within_widens_the_declared_allowance_by_its_margin():
    off = _adapter(lambda out: out * (1 + 1e-4))  # 30 times float32's allowance here (measured: margin 29.5)
    with pytest.raises(Nonconformance):
        _judged(off, _fact(FLOAT32))
    assert _judged(off, _fact(FLOAT32 + "within: 1.0e+3\n"))[0] <= 1


RAISES = "kind: raises\nraises: ValueError\nmatch: 'one row'\nreason: refused\n"


def _raising(exc):
    def causal_attention(**given):
        raise exc

    return types.SimpleNamespace(DTYPES=("float64",), causal_attention=causal_attention)


def test_a_declared_raise_passes_the_declared_exception_and_a_subclass():
    class Narrower(ValueError):
        pass

    for exc in (ValueError("needs more than one row"), Narrower("one row only")):
        calls.forget()
        assert _judged(_raising(exc), _fact(RAISES))[3]["raised"].endswith(str(exc))


def test_another_exception_or_message_fails_a_declared_raise():
    for exc in (TypeError("one row"), ValueError("a shape")):
        calls.forget()
        with pytest.raises(Nonconformance, match="declares it raises ValueError matching 'one row'"):
            _judged(_raising(exc), _fact(RAISES))


def test_numbers_returned_where_a_raise_is_declared_are_a_stale_declaration():
    exact = types.SimpleNamespace(DTYPES=("float64",), causal_attention=reference.causal_attention)
    with pytest.raises(verify.StaleDeclaration, match="returned numbers where 'the_fact'"):
        _judged(exact, _fact(RAISES))


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kind: precision\nreason: r\n", "a precision entry names what it is judged at"),
        ("kind: precision\ncomputed_in: float8\nreason: r\n", "field 'computed_in'"),
        ("kind: raises\nmatch: x\nreason: r\n", "field 'raises'"),
        ("kind: raises\nraises: ValueError\nmatch: '('\nreason: r\n", "field 'match'"),
        ("kind: raises\nraises: ValueError\nreason: r\n", "field 'match'"),
        ("kind: guess\nreason: r\n", "field 'kind': one of precision, raises, convention, bug"),
        ("kind: bug\nreason: r\ncomputed_in: float32\n", "field 'computed_in': not a field of a bug entry"),
        ("kind: bug\n", "field 'reason'"),
    ],
)
def test_each_field_of_a_kind_is_checked_and_named(text, field):
    with pytest.raises(loader.SpecError, match=f"test: entry 'the_fact': {field}"):
        _fact(text)


def test_a_fact_covers_its_patterns_but_its_except(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "float64_inside:\n  kind: precision\n  computed_in: float32\n  reason: r\n"
        '  tests: ["test_*[mine-float64-*]"]\n  except: ["test_context[mine-float64-sat]"]\n'
    )
    found = divergences.load(path, "mine")
    assert divergences.reason_for("test_weights[mine-float64-sat]", found).fact == "float64_inside"
    assert divergences.reason_for("test_context[mine-float64-sat]", found) is None
    assert divergences.reason_for("test_context[mine-float32-sat]", found) is None


def test_a_fact_needs_its_tests_and_an_id_keyed_entry_has_none(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("float64_inside:\n  kind: bug\n  reason: r\n")
    with pytest.raises(loader.SpecError, match="entry 'float64_inside': field 'tests': a list of test-id patterns"):
        divergences.load(path)
    path.write_text('"test_context[mine-float64-sat]":\n  kind: bug\n  reason: r\n  tests: ["test_*[mine-*-*]"]\n')
    with pytest.raises(loader.SpecError, match="field 'tests': an entry keyed by a test id covers that id alone"):
        divergences.load(path)


def test_an_adapters_own_entry_may_be_text_or_a_fact_with_its_kind():
    own = types.SimpleNamespace(
        MODE="eager",
        KNOWN_DIVERGENCES={
            "padding_fully_masked": "NaN on a fully masked row",
            "float64_in_float32": {
                "kind": "precision",
                "computed_in": "float32",
                "reason": "measured",
                "tests": ["*/*/float64"],
                "except": ["sat/*/float64"],
            },
        },
    )
    found = divergences.declared("mine", own)
    nan = divergences.reason_for("test_weights[mine-float32-padding_fully_masked]", found)
    assert nan.kind == "bug" and nan.unbounded and nan.check({})["kind"] is None  # the case says: a convention
    inside = divergences.reason_for("test_context[mine-float64-one_head]", found)
    assert (inside.kind, inside.computed_in, inside.fact) == ("precision", "float32", "float64_in_float32")
    assert divergences.reason_for("test_context[mine-float64-sat]", found) is None


def test_an_adapters_own_entry_with_a_bad_field_names_it():
    own = types.SimpleNamespace(MODE="eager", KNOWN_DIVERGENCES={"x": {"kind": "precision", "reason": "r"}})
    with pytest.raises(loader.SpecError, match="the adapter's KNOWN_DIVERGENCES, entry 'x': a precision entry"):
        divergences.declared("mine", own)


def test_a_convention_beside_a_broad_precision_takes_its_tests_and_two_conventions_are_refused(tmp_path):
    """An outside trial's contract example, a float64 precision over every case beside the fully masked row's NaN,
    stopped the run as a contradiction: the convention says what that test's numbers are, the precision the rest."""
    path = tmp_path / "mine.yaml"
    path.write_text(
        'nan_row:\n  kind: convention\n  reason: r\n  tests: ["test_*[mine-*-padding_fully_masked]"]\n'
        'inside:\n  kind: precision\n  computed_in: float32\n  reason: r\n  tests: ["test_*[mine-float64-*]"]\n'
        'nan_again:\n  kind: bug\n  reason: r\n  tests: ["test_context[mine-float32-padding_fully_masked]"]\n'
    )
    found = divergences.load(path, "mine")
    assert declarations.one_for("test_weights[mine-float64-sat]", found).fact == "inside"
    assert declarations.one_for("test_weights[mine-float64-padding_fully_masked]", found).fact == "nan_row"
    assert divergences.reason_for("test_weights[mine-float64-padding_fully_masked]", found).fact == "nan_row"
    with pytest.raises(
        declarations.Contradiction, match="covered by two declared divergences, 'nan_row' .* 'nan_again'"
    ):
        declarations.one_for("test_context[mine-float32-padding_fully_masked]", found)


def test_a_pattern_matching_nothing_and_a_precision_no_test_needed_are_stale(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        'inside:\n  kind: precision\n  computed_in: float32\n  reason: r\n  tests: ["test_*[mine-float64-sat]"]\n'
        'typo:\n  kind: bug\n  reason: r\n  tests: ["test_*[mine-float64-sta]"]\n  except: ["test_*[mine-*-cta]"]\n'
    )
    found = divergences.load(path, "mine")
    expected = {"test_context[mine-float64-sat]"}

    def result(needed):
        said = {"kind": "precision", "fact": "inside", "source": str(path), "needed": needed}
        return {"mine": {"test_context[mine-float64-sat]": {"outcome": "passed", "declared": said}}}

    lines = declarations.stale(found, {"mine"}, expected, result(needed=False))
    assert lines == [
        "FAILED: known divergences that match no test (renamed or fixed?): "
        f"test_*[mine-float64-sta] (in {path}), test_*[mine-*-cta] (in {path})",
        f"FAILED: declared precisions that no test needed (every test they cover conforms at its own dtype): "
        f"inside (in {path})",
    ]
    assert declarations.stale(found, {"mine"}, expected, result(needed=True)) == lines[:1]
