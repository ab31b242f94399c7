"""Samples the suite's own tests share across stages: a minimal valid spec and the ways to break it, a few of
the real spec's cases as a spec of their own, and an adapter that returns one value for every output."""

import yaml

from attention_conformance.contract import ops
from attention_conformance.paths import SPEC_DIR
from attention_conformance.run import reports

VALID = """\
documents: {"000": 000_607594879886645b.txt}
vocabulary: [sat, cat]
families: [document values]
printed_rounding: half a unit of the last printed place
conventions: {causal: query i sees keys 0..i}
dtypes: {sweep: [], ops: [], reason: float32 only}
tolerances:
  golden:
    reason: measured
    float32: {atol: 1.0e-7, rtol: 9.5e-7}
    float64: {atol: 1.0e-15, rtol: 1.0e-13}
cases:
  - id: sat
    family: document values
    op: softmax
    inputs: {scores: [1.0, 2.0]}
    expect:
      weights:
        printed: [0.2689, 0.7311]
        decimals: 4
        source: {doc: "000", quote: "a line"}
"""

# name -> (replace this, with this, fragments the one-line error must contain)
MALFORMED = {
    "yaml_syntax": ("inputs: {scores: [1.0, 2.0]}", "inputs: {scores: [1.0, 2.0}", ["line 16", "not valid YAML"]),
    "tab_indent": ("    op: softmax", "\top: softmax", ["not valid YAML"]),
    "duplicate_key": ("    op: softmax\n", "    op: softmax\n    op: softmax\n", ["duplicate key 'op'"]),
    "duplicate_id": (
        '        source: {doc: "000", quote: "a line"}\n',
        '        source: {doc: "000", quote: "a line"}\n'
        "  - id: sat\n    family: document values\n    op: softmax\n    inputs: {scores: [1.0]}\n"
        "    expect: {weights: {golden: f.json#t}}\n",
        ["case 'sat'", "field 'id'", "duplicate"],
    ),
    "id_outside_vocabulary": ("  - id: sat", "  - id: sat_mat", ["case 'sat_mat'", "field 'id'", "'mat'"]),
    "unknown_top_key": ("cases:", "casses: []\ncases:", ["field 'casses'", "unknown key"]),
    "unknown_case_key": (
        "    op: softmax",
        "    op: softmax\n    tolerence: golden",
        ["case 'sat'", "field 'tolerence'"],
    ),
    "unknown_expect_key": (
        "        decimals: 4",
        "        decimals: 4\n        atol: 1",
        ["case 'sat'", "expect.weights.atol", "unknown key"],
    ),
    "missing_family": ("    family: document values\n", "", ["case 'sat'", "field 'family'", "missing"]),
    "unknown_family": (
        "family: document values",
        "family: documnet values",
        ["case 'sat'", "field 'family'", "'documnet values'"],
    ),
    "missing_op": ("    op: softmax\n", "", ["case 'sat'", "field 'op'", "missing"]),
    "unknown_op": ("op: softmax", "op: softmin", ["case 'sat'", "field 'op'", "softmin"]),
    "wrong_inputs": ("inputs: {scores: [1.0, 2.0]}", "inputs: {logits: [1.0, 2.0]}", ["case 'sat'", "field 'inputs'"]),
    "unknown_output": ("      weights:", "      probabilities:", ["case 'sat'", "expect.probabilities"]),
    "ragged_printed": (
        "printed: [0.2689, 0.7311]",
        "printed: [[0.2689], [0.7311, 0.1]]",
        ["case 'sat'", "expect.weights.printed", "ragged"],
    ),
    "string_number": (
        "printed: [0.2689, 0.7311]",
        "printed: [0.2689, '0.7311']",
        ["case 'sat'", "expect.weights.printed"],
    ),
    "nan_printed": (
        "printed: [0.2689, 0.7311]",
        "printed: [0.2689, .nan]",
        ["case 'sat'", "expect.weights.printed", "finite"],
    ),
    "inf_input": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: [1.0, .inf]}",
        ["case 'sat'", "field 'inputs.scores'"],
    ),
    "ragged_mask": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: [[true], [true, false]]}",
        ["case 'sat'", "field 'inputs.scores'"],
    ),
    "python_tag": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: !!python/object/apply:os.system ['true']}",
        ["not valid YAML"],
    ),
    "missing_source": ('        source: {doc: "000", quote: "a line"}\n', "", ["case 'sat'", "expect.weights.source"]),
    "unknown_document": ('source: {doc: "000"', 'source: {doc: "001"', ["case 'sat'", "expect.weights.source"]),
    "missing_decimals": ("        decimals: 4\n", "", ["case 'sat'", "expect.weights.decimals"]),
    "unknown_tolerance": (
        "        decimals: 4",
        "        decimals: 4\n        tolerance: loose",
        ["case 'sat'", "expect.weights.tolerance", "'loose'"],
    ),
    "tolerance_without_reason": ("    reason: measured\n", "", ["tolerance 'golden'", "field 'reason'"]),
    "negative_tolerance": ("atol: 1.0e-7", "atol: -1.0e-7", ["tolerance 'golden'", "field 'float32'"]),
    "checks_nothing": (
        "        printed: [0.2689, 0.7311]\n        decimals: 4\n",
        "        decimals: 4\n",
        ["case 'sat'", "expects nothing"],
    ),
    "empty_file": (VALID, "", ["top level must be a mapping"]),
    "zero_sized_axis": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: {uniform: [-1, 1], shape: [2, 0, 16], seed: 1}}",
        ["case 'sat'", "field 'inputs.scores.shape'", "[2, 0, 16] has a zero-sized axis 1"],
    ),
    "golden_ref_outside": (
        "inputs: {scores: [1.0, 2.0]}",
        "inputs: {scores: '../spec/x.json#s'}",
        ["case 'sat'", "field 'inputs.scores'", "inside golden/"],
    ),
    "golden_expectation_absolute": (
        "        decimals: 4",
        "        decimals: 4\n        golden: /etc/passwd#x",
        ["case 'sat'", "expect.weights.golden", "inside golden/"],
    ),
}


def few_cases(folder, *case_ids):
    """spec/attention.yaml with only `case_ids` kept, written to folder/few_cases.yaml: for tests of the machinery
    (reports, merging, declarations), where the whole spec's ~880 tests add minutes and check nothing more.
    Filtered from the real file, so its sections and these cases stay the real ones."""
    spec = yaml.safe_load((SPEC_DIR / "attention.yaml").read_text())  # anchors and merge keys resolved here
    kept = [case for case in spec["cases"] if case["id"] in case_ids]
    missing = set(case_ids) - {case["id"] for case in kept}
    assert not missing, f"renamed or removed from spec/attention.yaml: {sorted(missing)}"
    path = folder / "few_cases.yaml"
    path.write_text(yaml.safe_dump({**spec, "cases": kept}, sort_keys=False, allow_unicode=True))
    return path


class Garbage:
    """An adapter that returns `value` for every output of every op."""

    DTYPES = ("float32",)

    def __init__(self, value):
        self.value = value

    def __getattr__(self, op):
        if op not in ops.OPS:  # NOT_APPLICABLE and the like: not defined, as in a module without them
            raise AttributeError(op)
        outputs = ops.OPS[op][1]
        return lambda **_: self.value if len(outputs) == 1 else {name: self.value for name in outputs}


def write_finished_run(directory, adapter, spec, tests, mode="eager"):
    """A complete, finished run report of `adapter` in float32 holding `tests` ({test id: RESULT}), written by
    run/reports.py's own writer, for the readers of a reports folder."""
    reports.write_run(
        directory,
        adapter,
        version=f"{adapter} 1.0",
        mode={"name": mode, "runs": "as the test says"},
        dtypes=["float32"],
        devices={"cpu": "ran"},
        spec=spec,
        spec_sha256="0" * 64,
        numerics={},
        complete=True,
        expected=len(tests),
        tests=tests,
    )
