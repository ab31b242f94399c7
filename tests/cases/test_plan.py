"""The plan on the repository's spec, for fake adapter modules: every expectation is a test in the adapter's
first dtype, the sweep repeats only what compares with computed values, and each kind of NOT_APPLICABLE
key covers exactly what it names (a key that names nothing is reported, never silently ignored)."""

import types

import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases import loader, plan
from attention_conformance.contract.ops import OPS

SPEC = loader.load()


def _adapter(dtypes=("float32",), not_applicable=None, leave_out=()):
    functions = {op: (lambda **_: None) for op in OPS if op not in leave_out}
    return types.SimpleNamespace(DTYPES=dtypes, NOT_APPLICABLE=not_applicable or {}, **functions)


def test_the_adapters_first_dtype_comes_first_then_the_spec_sweep():
    assert plan.dtypes_for(SPEC, _adapter()) == ["float32", "float64", "float16", "bfloat16"]
    assert plan.dtypes_for(SPEC, reference) == ["float64", "float16", "bfloat16"]
    assert plan.declared_dtypes(SPEC, _adapter(("float32", "bfloat16"))) == ["float32", "bfloat16"]
    # A first dtype other than float32 still sweeps the float32 it declares: it was never planned.
    assert plan.declared_dtypes(SPEC, _adapter(("float64", "float32"))) == ["float64", "float32"]


def test_every_expectation_is_one_test_in_the_first_dtype_and_undeclared_dtypes_are_planned_not_applicable():
    planned = plan.tests(SPEC, {"fake": _adapter()})
    first = [t for t in planned if t.dtype == "float32"]
    assert [(t.case.id, t.output) for t in first] == [(c.id, o) for c in SPEC.cases.values() for o in c.expect]
    assert not any(t.not_applicable for t in first)
    assert [t.dtype for t in planned] == sorted((t.dtype for t in planned), key=plan.dtypes_for(SPEC, _adapter()).index)
    swept = [t for t in planned if t.dtype == "float16"]
    assert 0 < len(swept) < len(first)
    assert {t.not_applicable for t in swept} == {"float16 is not in the adapter's DTYPES"}
    assert len({t.id for t in planned}) == len(planned)
    assert first[0].id == f"test_{first[0].output}[fake-float32-{first[0].case.id}]"
    assert first[0].param_id == f"fake-float32-{first[0].case.id}"


@pytest.mark.parametrize(
    ("case_id", "output", "swept"),
    [
        ("thermostat", "weights", True),  # golden values: computed, repeated in every dtype
        ("sat", "query", False),  # a printed number stays a float32 statement
        ("v2_count", "count", False),  # an exact fact
        ("layer_port_from_torch", "context", False),  # sweep: false
        ("gradients_v1_cat_sat_mat", "grad_x", False),  # golden, but training is not a swept op
    ],
)
def test_the_sweep_repeats_computed_expectations_of_swept_ops_only(case_id, output, swept):
    case = SPEC.cases[case_id]
    assert plan.applies(SPEC, case, case.expect[output], "float32", "float32")
    assert plan.applies(SPEC, case, case.expect[output], "bfloat16", "float32") is swept


@pytest.mark.parametrize(
    ("key", "covered"),
    [
        ("float64", lambda t: t.dtype == "float64"),
        ("masked_attention", lambda t: t.case.op == "masked_attention"),
        ("padding_fully_masked", lambda t: t.case.id == "padding_fully_masked"),
        ("padding_fully_masked/weights", lambda t: (t.case.id, t.output) == ("padding_fully_masked", "weights")),
        ("attention_module/weights", lambda t: (t.case.op, t.output) == ("attention_module", "weights")),
        ("layer=gpt2", lambda t: t.case.inputs.get("layer") == "gpt2"),
        ("causal=true", lambda t: t.case.inputs.get("causal") is True),
    ],
)
def test_each_kind_of_not_applicable_key_covers_exactly_what_it_names(key, covered):
    planned = plan.tests(SPEC, {"fake": _adapter(("float32", "float64"), {key: "cannot"})}, ["float32", "float64"])
    skipped = {t.id for t in planned if t.not_applicable == "cannot"}
    assert skipped and skipped == {t.id for t in planned if covered(t)}


def test_an_optional_op_left_out_is_not_applicable_with_its_name():
    case = SPEC.cases["decode_chunk"]
    reason = plan.not_applicable(_adapter(leave_out=("decode_attention",)), case, "float32", "context")
    assert reason == "the adapter does not define decode_attention() (optional)"
    assert plan.not_applicable(_adapter(), case, "float32", "context") is None


def test_the_oracles_half_precision_tests_say_why_it_does_not_run_them():
    reasons = {t.not_applicable for t in plan.tests(SPEC, {"reference": reference}) if t.dtype == "bfloat16"}
    assert reasons == {"the oracle computes in float64 only"}


def test_keys_that_name_nothing_in_the_spec_are_reported():
    keys = ["float16", "layer=mha", "causal=false", "padding_fully_masked/weights", "attention_module/round_trip"]
    typos = ["layer_mha_smal", "layer=bert", "softmax/context", "Float16"]
    adapter = _adapter(not_applicable={k: "a reason" for k in keys + typos})
    assert plan.unmatched_not_applicable(SPEC, adapter) == sorted(typos)
