"""Every output of every op is pinned by the spec: a wrong adapter that transposes one output (its last
two axes, square or not), swaps it with another output of the same shape, negates it or zeroes it
fails some test of the spec. Built on the reference adapter (float64), one output changed at a time;
the spec's own tests of that op decide. A mutant that changes nothing (the output is zero, symmetric,
or equal to the one it swaps with on every spec input) is not a mutant and is not counted."""

import copy
import hashlib
import inspect
import types

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases import golden, loader, plan
from attention_conformance.contract import ops
from attention_conformance.run import calls, verify

SPEC = loader.load()
TRANSFORMS = ("transpose", "swap", "negate", "zero")
# Changes no test can tell from a conforming answer, because the output is a random draw whose law they
# keep: not mistakes a framework can make detectably.
INDISTINGUISHABLE = {
    "create_parameter/parameter transpose": "a square U[0, 1) draw transposed is a U[0, 1) draw",
    "dropout/dropout_train transpose": "dropout of a constant matrix transposed is dropout with a transposed mask",
    "layer_defaults/w_query transpose": "a square U(-b, b) draw transposed is a U(-b, b) draw",
    "layer_defaults/w_query negate": "a U(-b, b) draw negated is a U(-b, b) draw",
}
_ANSWERS = {}  # the reference's answer per op and inputs: each op's cases are computed once, not per mutant


def _answer(op, real, kwargs):
    h = hashlib.sha256(op.encode())
    for name, value in sorted(kwargs.items()):
        a = np.asarray(value)
        h.update(
            f"|{name}|{a.dtype}|{a.shape}|".encode() + (a.tobytes() if a.dtype != object else repr(value).encode())
        )
    key = h.hexdigest()
    if key not in _ANSWERS:
        _ANSWERS[key] = real(**kwargs)
    return copy.deepcopy(_ANSWERS[key])


def _changed(value, output, transform, others):
    value = np.asarray(value)
    if value.dtype.kind not in "fc" or value.ndim == 0 and transform == "transpose":
        return None
    if transform == "transpose":
        return np.swapaxes(value, -1, -2) if value.ndim >= 2 else None
    if transform == "negate":
        return -value
    if transform == "zero":
        return np.zeros_like(value)
    twin = next((o for o, v in others.items() if o != output and np.shape(v) == value.shape), None)
    return None if twin is None else np.asarray(others[twin])


def _mutant(op, output, transform):
    """The reference with `op`'s `output` changed; (module, whether it ever changed anything)."""
    real = getattr(reference, op)
    names = ops.OPS[op][1]
    changed = []

    def wrong(**kwargs):
        result = _answer(op, real, kwargs)
        outputs = result if len(names) > 1 else {names[0]: result}
        new = _changed(outputs[output], output, transform, outputs)
        if new is None or np.array_equal(new, np.asarray(outputs[output])):
            return result
        changed.append(True)
        return {**outputs, output: new} if len(names) > 1 else new

    wrong.__signature__ = inspect.signature(real)
    module = types.SimpleNamespace(**{n: getattr(reference, n) for n in ops.CONTRACT if hasattr(reference, n)})
    module.DTYPES, module.NOT_APPLICABLE = reference.DTYPES, reference.NOT_APPLICABLE
    setattr(module, op, wrong)
    return module, changed


def _outcomes(op, module):
    calls.forget()  # the last mutant's outputs, kept under the same adapter name, must not answer for this one
    goldens = golden.Goldens()
    found = []
    for test in plan.tests(SPEC, {"pinned": module}):
        if test.case.op != op or test.not_applicable:
            continue
        try:
            verify.verify(SPEC, "pinned", module, test.case, test.output, test.dtype, goldens)
            found.append("passed")
        except verify.Nonconformance:
            found.append("failed")
        except Exception:  # noqa: BLE001 - a crash on a wrong output counts as caught, as under pytest
            found.append("failed")
    return found


OPS_WITH_CASES = sorted({c.op for c in SPEC.cases.values()} & set(ops.OPS))


@pytest.mark.parametrize("op", OPS_WITH_CASES)
def test_every_output_change_fails_a_test(op):
    survivors = []
    for output in ops.OPS[op][1]:
        for transform in TRANSFORMS:
            module, changed = _mutant(op, output, transform)
            outcomes = _outcomes(op, module)
            name = f"{op}/{output} {transform}"
            if changed and "failed" not in outcomes and name not in INDISTINGUISHABLE:
                survivors.append(name)
    assert not survivors, f"wrong adapters no spec test catches: {survivors}"
