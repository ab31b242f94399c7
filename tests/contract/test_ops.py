"""The op table (attention_conformance/contract/ops.py) agrees with itself: every parameter an op takes is
described, every op's forms and every optional op is an op, the outputs and the contract are derived from
the ops, and every name can be written in a NOT_APPLICABLE key or a test id.
"""

from attention_conformance import ports
from attention_conformance.contract import ids
from attention_conformance.contract.ops import CHOICES, CONTRACT, FORMS, LAYERS, OPS, OPTIONAL, OUTPUTS, PARAMETERS

KINDS = {"tokens", "square", "mask", "padding", "weight", "bias", "width", "heads", "seed", "probability", "count"}
KINDS |= {
    "rate",
    "offset",
    "window",
    "reach",
    "chunk",
    "floor",
    "temperature",
    "rotary",
    "base",
    "factor",
    "position",
    "cap",
    "sink",
    "gain",
    "epsilon",
    "table",
    "buckets",
    "distance",
    "offsets",
    "switch",
    "multiplier",
    "choice",
}  # PARAMETERS' comment lists these, and no other
TOKEN_KINDS = {"tokens", "square", "mask", "padding"}


def test_every_parameter_of_every_op_is_described_and_every_description_is_used():
    used = {p for params, _ in OPS.values() for p in params}
    assert used - set(PARAMETERS) == set()  # the `check` command could not build the missing ones
    assert set(PARAMETERS) - used == set()
    assert set(PARAMETERS.values()) <= KINDS


def test_no_op_takes_or_returns_a_name_twice():
    for op, (params, outputs) in OPS.items():
        assert len(set(params)) == len(params) and len(set(outputs)) == len(outputs) and outputs, op


def test_the_ops_with_token_tensors_are_exactly_those_with_forms():
    with_tokens = {op for op, (params, _) in OPS.items() if any(PARAMETERS[p] in TOKEN_KINDS for p in params)}
    assert set(FORMS) == with_tokens
    for op, forms in FORMS.items():
        assert forms and set(forms) <= {"row", "unbatched", "batched"} and len(set(forms)) == len(forms), op


def test_optional_ops_are_ops_and_the_contract_is_every_op_and_version():
    assert OPTIONAL <= set(OPS)
    assert CONTRACT == {"version": (), **{op: params for op, (params, _) in OPS.items()}}


def test_outputs_are_the_sorted_union_of_every_ops_outputs():
    assert list(OUTPUTS) == sorted(set(OUTPUTS))
    assert set(OUTPUTS) == {out for _, outs in OPS.values() for out in outs}


def test_every_choice_is_a_parameter_that_takes_words_the_keys_can_write():
    for param, values in CHOICES.items():
        assert PARAMETERS[param] == "choice", param
        assert values and len(set(values)) == len(values), param
        for value in values:
            assert ids.NOT_APPLICABLE_KEY.fullmatch(ids.parameter_key(param, value)), (param, value)
    assert [p for p, kind in PARAMETERS.items() if kind == "choice"] == list(CHOICES)
    assert CHOICES["layer"] == LAYERS and CHOICES["checkpoint"] == ports.LAYOUTS


def test_every_op_output_and_parameter_name_can_be_written_in_a_key_and_a_test_id():
    for op, (params, outputs) in OPS.items():
        for output in outputs:
            assert ids.NOT_APPLICABLE_KEY.fullmatch(f"{op}/{output}"), (op, output)
            made = (output, "torch", "float32", "a_case")
            assert ids.parse(ids.test_id(*made)) == made
        for param in params:
            assert ids.NOT_APPLICABLE_KEY.fullmatch(ids.parameter_key(param, 1)).group(4) == param, (op, param)
