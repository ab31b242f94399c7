"""Golden data: exact round trip, corruption refused, and a perturbed value caught by the suite."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from golden_files import resign

from attention_conformance.cases import golden
from attention_conformance.paths import CONFORMANCE_TESTS

ROOT = Path(__file__).resolve().parent.parent.parent


def test_text_format_round_trips_bit_for_bit():
    rng = np.random.default_rng(0)
    tensors = {
        "a32": rng.standard_normal((4, 5)).astype(np.float32) * np.float32(1e-3),
        "b64": rng.standard_normal((2, 3, 2)),
        "tiny": np.array([1e-38, -0.0, 3.4e38], dtype=np.float32),
    }
    back = golden.parse(golden.render("d", tensors), "<test>")
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype
        assert back[name].tobytes() == array.tobytes()


def test_render_refuses_non_finite():
    with pytest.raises(golden.GoldenError, match="NaN"):
        golden.render("d", {"x": np.array([1.0, np.nan])})


BAD_FILES = {
    "not_json": ("{", "not valid JSON"),
    "nan": (
        '{"description": "", "tensors": {"x": {"dtype": "float64", "shape": [1], "data": [NaN]}}}',
        "NaN is not allowed",
    ),
    "duplicate_key": ('{"description": "", "description": "", "tensors": {}}', "duplicate key 'description'"),
    "extra_field": (
        '{"description": "", "tensors": {"x": {"dtype": "float64", "shape": [1], "data": [1], "scale": 2}}}',
        "tensor 'x'",
    ),
    "bad_dtype": (
        '{"description": "", "tensors": {"x": {"dtype": "int8", "shape": [1], "data": [1]}}}',
        "field 'dtype'",
    ),
    "ragged": (
        '{"description": "", "tensors": {"x": {"dtype": "float64", "shape": [2, 2], "data": [[1, 2], [3]]}}}',
        "field 'data'",
    ),
    "shape_mismatch": (
        '{"description": "", "tensors": {"x": {"dtype": "float64", "shape": [3], "data": [1, 2]}}}',
        "'shape' says [3]",
    ),
    "string_number": (
        '{"description": "", "tensors": {"x": {"dtype": "float64", "shape": [2], "data": [1, "2"]}}}',
        "field 'data'",
    ),
    "deep": ('{"description": "", "tensors": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_malformed_golden_text_is_refused(name):
    text, fragment = BAD_FILES[name]
    with pytest.raises(golden.GoldenError) as info:
        golden.parse(text, "bad.json")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def _perturb(directory, file_name, tensor, index, delta, fix_manifest):
    path = directory / file_name
    doc = json.loads(path.read_text())
    row = doc["tensors"][tensor]["data"]
    for i in index[:-1]:
        row = row[i]
    row[index[-1]] += delta
    tensors = golden.parse(json.dumps(doc), str(path))
    path.write_text(golden.render(doc["description"], tensors))
    if fix_manifest:  # a deliberate edit: the hash is current, only the number is wrong
        resign(directory, file_name)


def test_edited_golden_file_is_refused_by_its_hash(golden_copy):
    _perturb(golden_copy, "doc000_seed123.json", "context", (2, 1), 1e-4, fix_manifest=False)
    with pytest.raises(golden.GoldenError, match=r"doc000_seed123.json: sha256 does not match"):
        golden.Goldens(golden_copy).tensor("doc000_seed123.json#context")


def test_missing_golden_file_is_named(golden_copy):
    (golden_copy / "doc000_thermostat.json").unlink()
    with pytest.raises(golden.GoldenError, match="doc000_thermostat.json: missing"):
        golden.Goldens(golden_copy).tensor("doc000_thermostat.json#s")


@pytest.mark.parametrize("ref", ["../spec/attention.json#x", "/etc/passwd#x", "sub/doc.json#x", "doc000_seed123.json"])
def test_reference_outside_golden_is_refused(ref):
    with pytest.raises(golden.GoldenError, match="golden"):
        golden.Goldens().tensor(ref)


def test_perturbed_golden_value_fails_the_suite_naming_tensor_and_element(golden_copy):
    """One stored value moved by 1e-4 (hash updated, as a careless regeneration would): the suite fails."""
    _perturb(golden_copy, "doc000_seed123.json", "context", (2, 1), 1e-4, fix_manifest=True)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--adapter",
            "reference",
            "--golden-dir",
            str(golden_copy),
            "--reports",
            str(golden_copy.parent / "reports"),
            str(CONFORMANCE_TESTS),
            "-k",
            "test_context and v1_seed123",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout[-2000:]
    assert "golden doc000_seed123.json#context" in run.stdout
    assert "worst element [2, 1]" in run.stdout
