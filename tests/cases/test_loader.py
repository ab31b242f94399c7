"""load_file on small specs (tests/spec_samples.py's base): what a valid one loads as (defaults filled in,
tolerances read per dtype), the malformed shapes tests/cases/test_spec.py and test_hostile.py leave out, each
refused in one line naming the file, the case and the field; and golden_references, the list the plugin reads
and hash-checks first."""

import pytest
from spec_samples import VALID

from attention_conformance.cases import loader

PRINTED = '        printed: [0.2689, 0.7311]\n        decimals: 4\n        source: {doc: "000", quote: "a line"}\n'
GROUPED = (
    "op: grouped_attention\n    inputs: {x: {fill: 1.0, shape: [2, 4]}, w_query: {fill: 0.5, shape: [4, 4]}, "
    "w_key: {fill: 0.5, shape: [4, KEY]}, w_value: {fill: 0.5, shape: [4, 2]}, num_heads: 2, num_kv_heads: KV, "
    "causal: false}"
)
SMALL = "op: softmax\n    inputs: {scores: [1.0, 2.0]}"
X_W = "x: {fill: 1.0, shape: [1, 2, 4]}, w_query: {fill: 0.5, shape: [4, Q]}, w_key: {fill: 0.5, shape: [4, Q]}, "
X_W += "w_value: {fill: 0.5, shape: [4, Q]}"


def _load(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path, loader.load_file(path)


def test_a_minimal_spec_loads_with_its_defaults_filled_in(tmp_path):
    path, spec = _load(tmp_path, VALID)
    case = spec.cases["sat"]
    assert (case.file, case.family, case.op, case.inputs) == (
        str(path),
        "document values",
        "softmax",
        {"scores": [1.0, 2.0]},
    )
    assert (case.note, case.erratum, case.convention, case.sweep) == ("", None, None, True)
    weights = case.expect["weights"]
    # A toleranced field without a named tolerance is compared within 'golden', and says so in `given`.
    assert weights.given == ("printed", "decimals", "source", "tolerance") and weights.tolerance == "golden"
    assert weights.printed == [0.2689, 0.7311] and weights.golden is None
    assert spec.tolerances["golden"].bounds("float32") == (1e-7, 9.5e-7)
    assert (spec.vocabulary, spec.families) == (("sat", "cat"), ("document values",))


def test_an_expectation_compared_within_no_tolerance_names_none(tmp_path):
    _, spec = _load(tmp_path, VALID.replace(PRINTED, "        in_range: [0, 1]\n"))
    assert spec.cases["sat"].expect["weights"].given == ("in_range",)
    assert spec.cases["sat"].expect["weights"].tolerance is None


# name -> (replace this, with this, fragments the one-line error must contain)
MALFORMED = {
    "missing_top_key": (
        "printed_rounding: half a unit of the last printed place\n",
        "",
        ["'printed_rounding'", "missing"],
    ),
    "duplicate_family": ("families: [document values]", "families: [document values, document values]", ["'families'"]),
    "tolerance_unknown_dtype": (
        "float32: {atol",
        "float8: {atol",
        ["tolerance 'golden'", "field 'float8'", "unknown key"],
    ),
    "half_sweep_without_low_precision": ("sweep: []", "sweep: [float16]", ["field 'tolerances'", "'low_precision'"]),
    "sweep_of_unknown_op": ("ops: []", "ops: [softmin]", ["field 'dtypes'"]),
    "no_golden_tolerance": ("  golden:\n", "  measured:\n", ["case 'sat'", "expect.weights.tolerance", "'golden'"]),
    "case_not_a_mapping": (PRINTED, PRINTED + "  - just text\n", ["case #2", "must be a mapping"]),
    "case_without_id": ("  - id: sat\n    family", "  - family", ["case #1", "field 'id'", "missing"]),
    "unknown_convention": (
        "    op: softmax",
        "    convention: causl\n    op: softmax",
        ["case 'sat'", "'convention'", "'causl'"],
    ),
    "erratum_without_fact": (
        "    op: softmax",
        '    erratum: {doc: "000", claim: "it says so"}\n    op: softmax',
        ["case 'sat'", "field 'erratum'"],
    ),
    "sweep_not_a_bool": ("    op: softmax", "    sweep: 0\n    op: softmax", ["case 'sat'", "field 'sweep'"]),
    "generated_with_extra_key": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: {fill: 1.0, shape: [2], seed: 1}}",
        ["case 'sat'", "field 'inputs.scores'", "a generated input is"],
    ),
    "kv_heads_not_dividing": (
        SMALL,
        GROUPED.replace("KEY", "4").replace("KV", "3"),
        ["case 'sat'", "field 'inputs.num_kv_heads'", "3 does not divide num_heads 2"],
    ),
    "scale_not_positive": (
        SMALL,
        "op: scale_flag\n    inputs: {" + X_W.replace("Q", "4") + ", softmax_scale: -1.0, causal: false}",
        ["case 'sat'", "field 'inputs.softmax_scale'", "(0, 10000]"],
    ),
    "padding_before_real_keys": (
        SMALL,
        "op: key_padding_flag\n    inputs: {" + X_W.replace("Q", "4") + ", padding: [[true, false]]}",
        ["case 'sat'", "field 'inputs.padding'", "real keys come first"],
    ),
    "chunks_padded_on_the_right": (
        SMALL,
        "op: chunked_attention\n    inputs: {" + X_W.replace("Q", "4") + ", chunk: 2, padding: [[false, true]]}",
        ["case 'sat'", "field 'inputs.padding'", "left padding"],
    ),
    "chunk_of_no_tokens": (
        SMALL,
        "op: chunked_flag\n    inputs: {" + X_W.replace("Q", "4") + ", chunk: 0, padding: [[false, false]]}",
        ["case 'sat'", "field 'inputs.chunk'", "chunks of 1 token or more"],
    ),
    "decoder_heads_of_odd_width": (
        SMALL,
        "op: decoder_attention\n    inputs: {" + X_W.replace("Q", "6") + ", num_heads: 2, num_kv_heads: 2, "
        "pairing: rotate_half, window: 2, cap: 0.0, sinks: [0.0, 0.0]}",
        ["case 'sat'", "field 'inputs.w_query'", "heads of 3 dims"],
    ),
    "cumulative_lengths_not_increasing": (
        SMALL,
        "op: varlen_attention\n    inputs: {" + X_W.replace("Q", "4") + ", num_heads: 2, cu_seqlens: [0, 2, 2], "
        "causal: true}",
        ["case 'sat'", "field 'inputs.cu_seqlens'", "cumulative lengths"],
    ),
    "cumulative_lengths_short_of_the_row": (
        SMALL,
        "op: varlen_flag\n    inputs: {" + X_W.replace("Q", "4") + ", num_heads: 2, cu_seqlens: [0, 1], causal: true}",
        ["case 'sat'", "field 'inputs.cu_seqlens'", "ends at 1, where x holds 2 tokens"],
    ),
    "key_width_not_kv_heads": (
        SMALL,
        GROUPED.replace("KEY", "3").replace("KV", "1"),
        ["case 'sat'", "field 'inputs.w_key'", "width 3 is not 1 heads of w_query's 4 / 2"],
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_spec_is_refused_in_one_line_naming_file_case_and_field(tmp_path, name):
    old, new, fragments = MALFORMED[name]
    assert old in VALID, "the entry no longer edits the base spec"
    path = tmp_path / "spec.yaml"
    path.write_text(VALID.replace(old, new, 1))
    with pytest.raises(loader.SpecError) as refused:
        loader.load_file(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert all(fragment in message for fragment in fragments), message


def test_golden_references_lists_each_reference_once_from_inputs_and_expectations(tmp_path):
    text = VALID.replace("inputs: {scores: [1.0, 2.0]}", "inputs: {scores: 'a.json#s'}").replace(
        PRINTED,
        "        golden: b.json#w[1]\n"
        "  - id: cat\n    family: document values\n    op: softmax\n    inputs: {scores: [1.0]}\n"
        "    expect: {weights: {golden: a.json#s}}\n",
    )
    _, spec = _load(tmp_path, text)
    assert loader.golden_references(spec) == ["a.json#s", "b.json#w[1]"]  # the list input [1.0] is no reference


def test_the_repository_specs_references_include_inputs_and_expected_values():
    refs = loader.golden_references(loader.load())
    assert {"doc000_thermostat.json#s", "doc000_seed123.json#x[2]"} <= set(refs)  # inputs, a row of one included
    assert "doc000_thermostat.json#softmax_s" in refs  # an expected value, no case's input
    assert all("#" in ref for ref in refs) and refs == sorted(set(refs))
