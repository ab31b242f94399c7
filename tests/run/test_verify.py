"""Verifying one test: the reference passes a small spec case with its margin and the element that set it; a
wrong output raises a Nonconformance naming the label, the worst element (the selected row first) and got
against expected; verify_all turns a whole spec into outcomes for an adapter of one op."""

import types

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases import golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.run import verify

SPEC = loader.load()
GOLDENS = golden.Goldens()
THERMOSTAT = SPEC.cases["thermostat"]  # softmax of five scores: printed, golden and row-sum expectations


pytestmark = pytest.mark.usefixtures("fresh_oracle")


def _softmax_adapter(change=lambda w: w, dtype="float64"):
    def softmax(scores):
        exact = reference.softmax(np.asarray(scores, dtype=np.float64))
        return change(np.array(exact)).astype(dtype)

    return types.SimpleNamespace(DTYPES=(dtype,), softmax=softmax)


def test_the_reference_passes_with_its_margin_and_worst_element():
    margin, ulp, worst = verify.verify(SPEC, "reference", reference, THERMOSTAT, "weights", "float64", GOLDENS)
    assert 0 <= margin < 1 and ulp >= 0
    assert set(worst) == {"element", "got", "expected", "error", "allowed", "tolerance", "from", "elements"}
    assert worst["error"] <= worst["allowed"]


def test_a_wrong_output_is_a_nonconformance_naming_the_worst_element():
    def nudge(weights):
        weights[3] += 1e-3
        return weights

    with pytest.raises(Nonconformance) as failed:
        verify.verify(SPEC, "nudged", _softmax_adapter(nudge), THERMOSTAT, "weights", "float64", GOLDENS)
    message = str(failed.value)
    assert message.startswith("nudged float64, case 'thermostat', output 'weights' of softmax(): worst element [3]: ")
    assert "\n" not in message and "got " in message and "but should be " in message


def test_an_expectation_about_one_row_names_elements_from_that_row():
    sat = SPEC.cases["sat"]
    row = sat.expect["weights"].row
    _, _, worst = verify.verify(SPEC, "reference", reference, sat, "weights", "float64", GOLDENS)
    assert worst["element"] == [row] and worst["from"].startswith("row_sums")  # the row's sum set the margin
    wrong = types.SimpleNamespace(DTYPES=("float64",), attention=lambda **kw: _scrambled(reference.attention(**kw)))
    with pytest.raises(Nonconformance, match=rf"worst element \[{row}, \d\]"):
        verify.verify(SPEC, "wrong", wrong, sat, "weights", "float64", GOLDENS)


def _scrambled(outputs):
    outputs["weights"] = outputs["weights"][..., ::-1].copy()  # each row's keys in reverse
    return outputs


def test_verify_all_runs_what_the_adapter_defines_and_fails_what_it_gets_wrong():
    def wrong_on_long_rows(weights):
        return weights[..., ::-1] if weights.shape[-1] > 100 else weights

    adapter = _softmax_adapter(wrong_on_long_rows, "float32")
    results = verify.verify_all(SPEC, "softmax_only", adapter, GOLDENS, dtypes=["float32"])
    softmax = {f"test_weights[softmax_only-float32-{c.id}]" for c in SPEC.cases.values() if c.op == "softmax"}
    outcomes = {tid: outcome for tid, (outcome, _) in results.items()}
    assert outcomes.pop("test_weights[softmax_only-float32-softmax_long_row]") == "failed"
    assert {outcomes.pop(tid) for tid in softmax - {"test_weights[softmax_only-float32-softmax_long_row]"}} == {
        "passed"
    }
    assert set(outcomes.values()) == {"not applicable"}  # every other op is left undefined


def test_a_failure_on_a_case_that_states_a_convention_names_it_and_how_to_declare_another():
    case = SPEC.cases["decode_flag_chunk"]  # a causal flag over fewer queries than keys: conventions.causal_alignment

    def top_left(x, w_query, w_key, w_value, start):  # the flag aligned as some frameworks do
        rows = reference.causal_attention(x, w_query, w_key, w_value)["context"]
        return rows[..., : rows.shape[-2] - start, :]

    adapter = types.SimpleNamespace(DTYPES=("float64",), causal_flag=top_left)
    with pytest.raises(Nonconformance) as failed:
        verify.verify(SPEC, "top_left", adapter, case, "context", "float64", GOLDENS)
    assert "this case states the spec's conventions.causal_alignment" in str(failed.value)
    assert "KNOWN_DIVERGENCES, shown as `conv`" in str(failed.value)
    plain = SPEC.cases["thermostat"]
    with pytest.raises(Nonconformance) as failed:
        verify.verify(SPEC, "off", _softmax_adapter(lambda w: w * 1.01), plain, "weights", "float64", GOLDENS)
    assert "conventions." not in str(failed.value)


def test_an_exact_zero_missed_says_nothing_there_can_round_not_a_count_of_subnormals():
    # An outside trial's padding rows not zeroed read "6.55e+39 ULP of bfloat16": a ULP of 0 is the smallest subnormal.
    def unzeroed(**inputs):
        out = reference.query_padding_attention(**inputs)
        return {name: np.asarray(value) + 0.25 for name, value in out.items()}

    case = SPEC.cases["query_padding_both_ends"]
    adapter = types.SimpleNamespace(DTYPES=("float32",), query_padding_attention=unzeroed)
    with pytest.raises(Nonconformance) as failure:
        verify.verify(SPEC, "unzeroed", adapter, case, "weights", "float32", GOLDENS)
    said = str(failure.value)
    assert "should be 0.0" in said and "nothing there can round" in said and "ULP of float32" not in said, said
