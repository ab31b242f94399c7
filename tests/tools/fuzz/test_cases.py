"""fuzz's drawing (attention_conformance/tools/fuzz/cases.py): every case it draws is one the spec could hold (its
op covered, its inputs in the spec's own vocabulary, accepted by the loader's own checks) and one the reference
answers."""

import hypothesis_profiles  # noqa: F401 - the ci/dev profiles, loaded before any @given
import numpy as np
from hypothesis import given, settings

from attention_conformance.adapters import reference
from attention_conformance.cases.inputs import resolve
from attention_conformance.contract import ops
from attention_conformance.tools.fuzz import cases

COVERED = ("softmax", "masked_attention", "grouped_attention", "decode_attention")


def test_every_covered_op_is_a_forward_op_of_the_contract():
    assert set(cases.COVERED) <= set(ops.OPS) and len(set(cases.COVERED)) == len(cases.COVERED)


@settings(max_examples=40, deadline=None, database=None)
@given(cases.strategy(COVERED))
def test_a_drawn_case_names_a_covered_op_with_its_parameters_and_the_reference_answers_it(drawn):
    op, inputs = drawn
    assert op in COVERED
    assert set(inputs) == set(ops.OPS[op][0]), f"{op}: {sorted(inputs)}"
    arrays = {name: resolve(value, "float64", None) for name, value in inputs.items()}  # no golden: all drawn
    result = getattr(reference, op)(**arrays)
    outputs = result if isinstance(result, dict) else {ops.OPS[op][1][0]: result}
    assert all(np.isfinite(np.asarray(outputs[name], dtype=np.float64)).all() for name in ops.OPS[op][1])
