"""Calling an adapter: one call per case and dtype whose outputs every test of the case shares, only the outputs
its expectations read kept, a raise or a malformed answer reported as the case's nonconformance, and the
seconds spent inside the adapter counted per op and dtype (the oracle's never)."""

import collections
import time
import types

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases import golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.run import calls

SPEC = loader.load()
GOLDENS = golden.Goldens()
THERMOSTAT = SPEC.cases["thermostat"]  # softmax of five scores


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))  # the oracle's answers go here
    monkeypatch.setattr(calls, "inside_s", collections.Counter())
    monkeypatch.setattr(calls, "inside_calls", collections.Counter())
    calls.forget()
    yield
    calls.forget()


def _counting(softmax):
    adapter = types.SimpleNamespace(DTYPES=("float32",), called=0)

    def counted(scores):
        adapter.called += 1
        return softmax(scores)

    adapter.softmax = counted
    return adapter


def test_the_reference_answers_a_spec_case_from_its_resolved_inputs():
    got = calls.outputs("reference", reference, THERMOSTAT, "float64", GOLDENS)
    scores = GOLDENS.tensor(THERMOSTAT.inputs["scores"]).astype(np.float64)
    assert list(got) == ["weights"] and np.array_equal(got["weights"], reference.softmax(scores))


def test_a_cases_outputs_come_from_one_call_shared_by_its_tests():
    adapter = _counting(lambda scores: np.full(scores.shape, 0.2, np.float32))
    first = calls.outputs("counted", adapter, THERMOSTAT, "float32", GOLDENS)
    assert calls.outputs("counted", adapter, THERMOSTAT, "float32", GOLDENS) is first and adapter.called == 1
    calls.outputs("counted", adapter, THERMOSTAT, "float16", GOLDENS)  # another dtype is another call
    assert adapter.called == 2


def test_only_the_outputs_a_case_expects_are_kept():
    # 'cat' expects the key alone; the query, scores, weights and context the call also returns are dropped.
    assert list(calls.outputs("reference", reference, SPEC.cases["cat"], "float64", GOLDENS)) == ["key"]


def test_the_seconds_inside_the_adapter_are_counted_per_op_and_dtype():
    def slow(scores):
        time.sleep(0.02)
        return scores

    calls.outputs("slow", _counting(slow), THERMOSTAT, "float32", GOLDENS)
    assert calls.inside_calls == {("softmax", "float32"): 1}
    assert calls.inside_s["softmax", "float32"] >= 0.02
    calls.outputs("reference", reference, THERMOSTAT, "float64", GOLDENS, input_dtype="float32", oracle=True)
    assert calls.inside_calls == {("softmax", "float32"): 1}  # the oracle's time is the suite's


def test_an_adapter_that_raises_fails_the_case_with_its_exception_chained_and_its_time_counted():
    def broken(scores):
        raise ValueError("boom\nsecond line")

    with pytest.raises(calls.AdapterRaised) as raised:
        calls.outputs("broken", _counting(broken), THERMOSTAT, "float32", GOLDENS)
    assert str(raised.value) == "broken float32, case 'thermostat': softmax() raised ValueError: boom"
    assert isinstance(raised.value.__cause__, ValueError)
    assert calls.inside_calls["softmax", "float32"] == 1


def test_a_multi_output_op_must_answer_every_output_not_declared_not_applicable():
    case = SPEC.cases["row_parameter"]  # create_parameter: parameter and trainable
    parameter = np.zeros((4, 4), np.float32)
    adapter = types.SimpleNamespace(DTYPES=("float32",), create_parameter=lambda **_: {"parameter": parameter})
    with pytest.raises(Nonconformance, match=r"returned \['parameter'\], should return a dict with \['parameter'"):
        calls.outputs("short", adapter, case, "float32", GOLDENS)
    adapter.NOT_APPLICABLE = {"create_parameter/trainable": "no trainable flag"}
    calls.forget()
    got = calls.outputs("short", adapter, case, "float32", GOLDENS)
    assert got["parameter"] is parameter and got["trainable"] is None


def test_the_oracles_three_answers_share_one_resolution_of_the_inputs_read_only(monkeypatch):
    """Issue 43: the exact answer, the bound and the rounded baseline of a case in a dtype resolved and hashed its
    inputs once each (597 resolutions for 277 adapter calls). The adapter keeps a copy of its own."""
    from attention_conformance.cases import inputs
    from attention_conformance.run import verify

    resolved = []
    original = inputs.resolve_all
    monkeypatch.setattr(inputs, "resolve_all", lambda *a: resolved.append(a[1]) or original(*a))
    case = SPEC.cases["sat"]
    for output in case.expect:
        verify.verify(SPEC, "reference", reference, case, output, "float16", GOLDENS)
    assert resolved == ["float16", "float16"]  # the adapter's call, then the oracle's
    (oracle_inputs,) = [kwargs for _, _, kwargs, _ in calls._oracle_inputs.values()]
    assert not any(v.flags.writeable for v in oracle_inputs.values() if isinstance(v, np.ndarray))
