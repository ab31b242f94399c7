"""The one test-id format and the patterns an adapter declares with (attention_conformance/contract/ids.py):
an id parses back to what made it, a declared key and its pattern are each other's inverse, a generated
case names its op, and a NOT_APPLICABLE key reads as the grammar says.
"""

import pytest

from attention_conformance.contract import ids


@pytest.mark.parametrize(
    "output,adapter,dtype,case_id",
    [
        ("weights", "torch", "float32", "padding_fully_masked"),
        ("context", "my-own-adapter", "bfloat16", "layer_gpt2_small"),  # a hyphen in an adapter's name
        ("grad_x", "tests.mutants.torch__scale", "float64", "fuzz_softmax"),
    ],
)
def test_a_test_id_parses_back_to_what_made_it(output, adapter, dtype, case_id):
    made = ids.test_id(output, adapter, dtype, case_id)
    assert made == f"test_{output}[{adapter}-{dtype}-{case_id}]"
    assert ids.parse(made) == (output, adapter, dtype, case_id)


@pytest.mark.parametrize(
    "text",
    ["test_weights", "weights[torch-float32-sat]", "test_weights[torch-float32-Sat]", "test_weights[torch-sat]"],
)
def test_what_is_not_a_test_id_parses_to_none(text):
    assert ids.parse(text) is None


@pytest.mark.parametrize(
    "key,pattern",
    [
        ("sat", "test_*[torch-*-sat]"),
        ("sat/weights", "test_weights[torch-*-sat]"),
        ("sat/weights/float16", "test_weights[torch-float16-sat]"),
        ("layer_*/context/*", "test_context[torch-*-layer_*]"),
    ],
)
def test_a_declared_key_and_its_pattern_are_each_others_inverse(key, pattern):
    assert ids.DECLARED.fullmatch(key)
    assert ids.declared_pattern("torch", key) == pattern
    full = "/".join((key.split("/") + ["*", "*"])[:3])  # the key with every part written out
    assert ids.declared_key(pattern) == full
    assert ids.declared_pattern("torch", full) == pattern


@pytest.mark.parametrize("key", ["Sat", "sat/weights/float16/extra", "sat weights", "sat/float-16"])
def test_a_malformed_declared_key_does_not_match(key):
    assert not ids.DECLARED.fullmatch(key)


def test_a_generated_case_names_its_op_and_a_typo_in_one_is_found():
    assert ids.generated_case("softmax") == "fuzz_softmax"
    assert ids.generated_op(ids.test_id("weights", "mlx", "float16", "fuzz_softmax")) == "softmax"
    assert ids.generated_op("test_weights[mlx-*-fuzz_*]") == "*"
    assert ids.generated_op(ids.test_id("weights", "mlx", "float16", "sat")) is None  # a spec case
    assert ids.generated_op("sat") is None
    ops = ["softmax", "attention", "grouped_attention"]
    assert ids.names_an_op("test_heads[mlx-*-fuzz_grouped_*]", ops)
    typo = "test_weights[mlx-*-fuzz_sofmax]"
    assert not ids.names_an_op(typo, ops)
    assert ids.misnamed_generated([typo, "test_weights[mlx-*-fuzz_softmax]", "test_weights[mlx-*-sat]"], ops) == [typo]


def test_an_adapter_is_read_from_a_test_id_or_a_pattern_with_wildcards():
    assert ids.adapter_of(ids.test_id("scores", "tests.mutants.torch__scale", "float32", "sat")) == (
        "tests.mutants.torch__scale"
    )
    assert ids.adapter_of("test_*[onnxruntime-*-sat]") == "onnxruntime"
    assert ids.adapter_of("sat/weights") is None
    assert ids.adapter_of(ids.test_id("weights", "my-own", "float16", "sat")) == "my-own"  # an entry point's name


@pytest.mark.parametrize(
    "key,groups",
    [
        ("float16", ("float16", None, None, None)),
        ("attention_module/weights", ("attention_module", "weights", None, None)),
        ("layer=mha", (None, None, "layer", "mha")),
    ],
)
def test_a_not_applicable_key_reads_as_its_grammar_says(key, groups):
    match = ids.NOT_APPLICABLE_KEY.fullmatch(key)
    assert (match.group(1), match.group(3), match.group(4), match.group(5)) == groups


@pytest.mark.parametrize("key", ["Layer=mha", "a/b/c", "layer=", "=mha", "float16 "])
def test_a_key_outside_the_grammar_does_not_match(key):
    assert ids.NOT_APPLICABLE_KEY.fullmatch(key) is None


def test_a_parameter_key_writes_switches_as_yaml_does():
    assert ids.parameter_key("causal", True) == "causal=true"
    assert ids.parameter_key("causal", False) == "causal=false"
    assert ids.parameter_key("num_heads", 2) == "num_heads=2"
    assert ids.NOT_APPLICABLE_KEY.fullmatch(ids.parameter_key("causal", True))
