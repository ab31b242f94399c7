"""Hostile input, found by trying the suite as an adversary would: each is refused in one line,
in bounded time and memory, or reported as the adapter's nonconformance; none crashes the suite."""

import json
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from golden_files import resign
from spec_samples import VALID, Garbage

from attention_conformance import cli
from attention_conformance.adapters import reference
from attention_conformance.cases import divergences, golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.paths import CONFORMANCE_TESTS
from attention_conformance.run.verify import verify
from attention_conformance.tools.benchmark import alias_bomb

ROOT = Path(__file__).resolve().parent.parent.parent
# A hang guard only: the bombs below are refused in 1 ms of CPU (measured, Xeon 2.8 GHz, AVX-512).
# Subprocess timeouts here are hang guards too: each command takes 2-5 s.
HANG_GUARD_CPU_S = 0.5


def validate(argv):
    return cli.main(["validate", *argv])


def _bounded(call):
    """Run `call`; return (result or exception, CPU seconds, peak MiB traced): neither depends on
    how busy the machine is, unlike wall-clock time."""
    tracemalloc.start()
    start = time.process_time()
    try:
        outcome = call()
    except Exception as exc:  # noqa: BLE001 - the caller asserts on what was raised
        outcome = exc
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return outcome, seconds, peak


def _spec_with(tmp_path, old, new):
    assert old in VALID
    path = tmp_path / "hostile.yaml"
    path.write_text(VALID.replace(old, new, 1))
    return path


def _refused(path, *fragments):
    before = path.read_bytes()
    with pytest.raises(loader.SpecError) as info:
        loader.load_file(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)), message
    for fragment in fragments:
        assert fragment in message, message
    assert path.read_bytes() == before
    return message


# --- the alias bomb ----------------------------------------------------------------------------


def test_alias_bomb_in_a_spec_is_refused_at_once_in_bounded_memory(tmp_path):
    path = _spec_with(tmp_path, "inputs: {scores: [1.0, 2.0]}", f"inputs: {{scores: {alias_bomb()}}}")
    outcome, cpu_seconds, peak = _bounded(lambda: loader.load_file(path))
    assert isinstance(outcome, loader.SpecError), outcome
    assert "aliases are expanded" in str(outcome) and str(outcome).startswith(str(path))
    assert peak < 20, peak  # expanded, it would be 387 million numbers
    assert cpu_seconds < HANG_GUARD_CPU_S, cpu_seconds


def test_alias_bomb_is_refused_by_the_command_and_by_pytest(tmp_path):
    path = _spec_with(tmp_path, "inputs: {scores: [1.0, 2.0]}", f"inputs: {{scores: {alias_bomb()}}}")
    for command, code in (
        ([sys.executable, "-m", "attention_conformance", "validate", str(path)], 1),
        (
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--adapter",
                "reference",
                "--spec",
                str(path),
                "--reports",
                str(tmp_path / "reports"),
                str(CONFORMANCE_TESTS),
            ],
            4,
        ),
    ):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == code, done.stdout + done.stderr
        assert "aliases are expanded" in done.stdout + done.stderr


def test_alias_bomb_in_known_divergences_is_refused(tmp_path):
    path = tmp_path / "divergences.yaml"
    path.write_text(f'"test_scores[torch-float32-sat]":\n  reason: {alias_bomb()}\n')
    outcome, cpu_seconds, peak = _bounded(lambda: divergences.load(path))
    assert isinstance(outcome, loader.SpecError) and str(outcome).startswith(str(path)), outcome
    assert peak < 20 and cpu_seconds < HANG_GUARD_CPU_S, (peak, cpu_seconds)


def test_recursive_alias_is_refused(tmp_path):
    path = _spec_with(tmp_path, "inputs: {scores: [1.0, 2.0]}", "inputs: {scores: &a [1.0, *a]}")
    _refused(path, "contains it")


def test_aliases_within_the_bound_still_load(tmp_path):
    """The repository's spec shares inputs with anchors and merges; a modest expansion is data."""
    path = _spec_with(tmp_path, "inputs: {scores: [1.0, 2.0]}", f"inputs: {{scores: {alias_bomb(levels=2, width=3)}}}")
    with pytest.raises(loader.SpecError, match="regular list"):  # refused as data (ragged), not as a bomb
        loader.load_file(path)
    assert len(loader.load().cases) > 60


def test_deep_nesting_is_refused_before_the_c_parser_recurses(tmp_path):
    # libyaml's composer recurses in C: 100,000 levels crash the process instead of raising.
    path = _spec_with(tmp_path, "[1.0, 2.0]", "[" * 100_000 + "1" + "]" * 100_000)
    _refused(path, "nested more than")


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_spec_that_is_not_a_regular_file_is_refused_without_reading(tmp_path, special):
    if special == "fifo":
        special = tmp_path / "fifo.yaml"
        import os

        os.mkfifo(special)  # reading it would block forever
    with pytest.raises(loader.SpecError, match="not a regular file"):
        loader.load_file(special)


def test_a_huge_integer_in_yaml_is_refused_in_one_line(tmp_path):
    path = _spec_with(tmp_path, "[1.0, 2.0]", "[1.0, " + "9" * 5000 + "]")
    _refused(path, "cannot be read")


# --- numbers that are not float32 data ---------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["1.0e+400", "-1.0e+39", str(10**400), ".inf"], ids=["1e400", "-1e39", "int_10e400", "inf"]
)
def test_spec_numbers_must_be_finite_float32(tmp_path, value):
    path = _spec_with(tmp_path, "[1.0, 2.0]", f"[1.0, {value}]")
    _refused(path, "case 'sat'", "field 'inputs.scores'", "float32")


def _replace_number(directory, file_name, old, new):
    """Edit one number in a golden file's text and re-sign it in the manifest, as a careless regeneration would."""
    path = directory / file_name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    resign(directory, file_name)


@pytest.mark.parametrize("number", [str(10**400), "1e400", "-1e39"], ids=["int_10e400", "1e400", "-1e39"])
def test_golden_numbers_must_be_finite_in_their_dtype(golden_copy, tmp_path, capsys, number):
    text = (golden_copy / "doc000_thermostat.json").read_text()
    tensor = "s" if '"s": {"dtype": "float32"' in text else None
    first = text.split('"data": [', 1)[1].split(",", 1)[0].split("]", 1)[0]
    _replace_number(golden_copy, "doc000_thermostat.json", first, number)
    assert validate(["--golden-dir", str(golden_copy)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "doc000_thermostat.json: tensor" in err and "element [0" in err, err
    assert "is not a finite float" in err
    if tensor and number == "-1e39":
        assert "float32" in err
    done = subprocess.run(
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
            str(tmp_path / "reports"),
            str(CONFORMANCE_TESTS),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stdout[-1500:] + done.stderr[-1500:]  # a usage error, never INTERNALERROR (3)
    assert "is not a finite float" in done.stderr


# --- golden files outside golden/ ----------------------------------------------------------------


def test_a_golden_symlink_leading_outside_the_directory_is_refused(golden_copy, tmp_path):
    outside = tmp_path / "elsewhere.json"
    shutil.copy(golden_copy / "doc000_thermostat.json", outside)
    (golden_copy / "doc000_thermostat.json").unlink()
    (golden_copy / "doc000_thermostat.json").symlink_to(outside)  # the manifest's hash still matches
    with pytest.raises(golden.GoldenError, match="outside"):
        golden.Goldens(golden_copy).tensor("doc000_thermostat.json#s")


def test_a_golden_manifest_that_is_a_symlink_outside_is_refused(golden_copy, tmp_path):
    outside = tmp_path / "manifest.json"
    shutil.move(golden_copy / golden.MANIFEST, outside)
    (golden_copy / golden.MANIFEST).symlink_to(outside)
    with pytest.raises(golden.GoldenError, match="outside"):
        golden.Goldens(golden_copy)


# --- values the validator must range-check -------------------------------------------------------

SMALL = "op: softmax\n    inputs: {scores: [1.0, 2.0]}"
RANGES = {
    "negative_d_in": ("op: parameters\n    inputs: {d_in: -3, d_out: 2, form: v1}", "inputs.d_in"),
    "zero_heads": (
        "op: fused_attention\n    inputs: {x: [[1.0]], w_query: [[1.0]], w_key: [[1.0]], w_value: [[1.0]], "
        "num_heads: 0, causal: false}",
        "inputs.num_heads",
    ),
    "heads_not_dividing": (
        "op: fused_attention\n    inputs: {x: [[1.0, 1.0]], w_query: [[1.0, 1.0, 1.0]], w_key: [[1.0]], "
        "w_value: [[1.0]], num_heads: 2, causal: false}",
        "do not divide",
    ),
    "negative_seed": ("op: create_parameter\n    inputs: {d_in: 3, d_out: 2, seed: -1}", "inputs.seed"),
    "huge_seed": ("op: create_parameter\n    inputs: {d_in: 3, d_out: 2, seed: 99999999999999999999}", "inputs.seed"),
    "float_size": ("op: create_parameter\n    inputs: {d_in: 3.5, d_out: 2, seed: 1}", "inputs.d_in"),
    "bool_size": ("op: create_parameter\n    inputs: {d_in: true, d_out: 2, seed: 1}", "inputs.d_in"),
    "p_of_one": ("op: dropout\n    inputs: {weights: [1.0], p: 1.0, seed: 0}", "inputs.p"),
    "negative_lr": (
        "op: sgd_step\n    inputs: {x: [[1.0]], w_query: [[1.0]], w_key: [[1.0]], w_value: [[1.0]], g: [[1.0]], "
        "lr: -0.1}",
        "inputs.lr",
    ),
    "zero_draws": ("op: draw\n    inputs: {distribution: uniform, n: 0, seed: 1}", "inputs.n"),
    "unknown_distribution": ("op: draw\n    inputs: {distribution: cauchy, n: 10, seed: 1}", "inputs.distribution"),
    "unknown_form": ("op: parameters\n    inputs: {d_in: 3, d_out: 2, form: v3}", "inputs.form"),
    "zero_d_k": ("op: scale\n    inputs: {scores: [1.0], d_k: 0}", "inputs.d_k"),
    "generated_too_big": ("op: softmax\n    inputs: {scores: {fill: 1.0, shape: [100000, 100000]}}", "over the limit"),
    "uniform_backwards": ("op: softmax\n    inputs: {scores: {uniform: [1, -1], shape: [2], seed: 1}}", "low < high"),
    "fill_overflows": ("op: softmax\n    inputs: {scores: {fill: 1.0e+39, shape: [2]}}", "inputs.scores.fill"),
}


@pytest.mark.parametrize("name", sorted(RANGES))
def test_out_of_range_values_are_refused_at_load_time(tmp_path, name):
    new, fragment = RANGES[name]
    text = VALID.replace(SMALL, new, 1).replace(
        "      weights:\n        printed: [0.2689, 0.7311]\n        decimals: 4\n"
        '        source: {doc: "000", quote: "a line"}\n',
        "      {out}: {shape: [2]}\n",
    )
    out = {
        "parameters": "count",
        "fused_attention": "heads",
        "create_parameter": "parameter",
        "dropout": "dropout_eval",
        "sgd_step": "w_query",
        "draw": "sample",
        "scale": "scaled",
        "softmax": "weights",
    }[new.split()[1]]
    path = tmp_path / "hostile.yaml"
    path.write_text(text.replace("{out}", out))
    _refused(path, "case 'sat'", fragment)


def test_a_printed_number_may_not_have_more_decimals_than_it_claims(tmp_path):
    path = _spec_with(tmp_path, "printed: [0.2689, 0.7311]", "printed: [0.26894, 0.7311]")
    _refused(path, "case 'sat'", "expect.weights.printed", "0.26894")


@pytest.mark.parametrize(
    "case_id",
    ["sat cat", "sat[0]", "Sat", "sat-cat", "sat_", "sat\n"],
    ids=["space", "brackets", "capital", "dash", "trailing_underscore", "newline"],
)
def test_case_ids_are_lowercase_words_whatever_the_vocabulary_says(tmp_path, case_id):
    vocabulary = json.dumps(["sat", "cat", case_id])
    text = VALID.replace("vocabulary: [sat, cat]", f"vocabulary: {vocabulary}").replace(
        "  - id: sat", f"  - id: {json.dumps(case_id)}"
    )
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    message = _refused(path)
    assert "'vocabulary'" in message or "field 'id'" in message


# --- the checker never crashes on a wrong output -------------------------------------------------


WRONG = {
    "nan": np.full((3, 3), np.nan, np.float32),
    "inf": np.full((3, 3), np.inf, np.float32),
    "huge": np.full((3, 3), 3e38, np.float32),
    "tiny_shape": np.zeros(1, np.float32),
    "scalar": np.float32(0.5),
    "empty": np.zeros((0,), np.float32),
    "int": np.ones((3, 3), np.int64),
    "complex": np.ones((3, 3), np.complex64),
    "list": [[1.0, 2.0], [3.0]],
    "none": None,
    "string": "context",
    "dict": {"a": 1},
    "objects": np.array([object()] * 3),
    "bool": np.ones((3, 3), bool),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_any_wrong_output_is_a_nonconformance_not_a_crash(name):
    loaded = loader.load()
    goldens = golden.Goldens()
    adapter = Garbage(WRONG[name])
    checked = 0
    for case in loaded.cases.values():
        if any(
            isinstance(v, dict) for v in case.inputs.values()
        ):  # generated (large) inputs: the reference is slow there
            continue
        for output in case.expect:
            try:
                verify(loaded, f"garbage_{name}", adapter, case, output, "float32", goldens)
            except Nonconformance as exc:
                assert "\n" not in str(exc)
            checked += 1
    assert checked > 100


def test_an_error_at_an_exact_zero_reads_as_the_wrong_number():
    """The fully masked row's weights are exactly 0 in float64: its ULP figure divides by spacing(0),
    which overflowed into a RuntimeWarning (an error under our warning filter) instead of this message."""
    loaded = loader.load()
    case = loaded.cases["padding_fully_masked"]

    class Uniform:
        DTYPES = ("float64",)

        @staticmethod
        def masked_attention(**inputs):
            out = reference.masked_attention(**inputs)
            out["weights"][0] = 1 / 6  # the finfo.min convention: a uniform row
            return out

    with pytest.raises(Nonconformance, match=r"worst element \[0, 0\]: got 0.1666.* but should be 0.0 .*ULP"):
        verify(loaded, "uniform", Uniform, case, "weights", "float64", golden.Goldens())


def test_safe_io_refuses_an_oversized_file_before_reading_it(tmp_path):
    from attention_conformance import safe_io

    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2000)
    with pytest.raises(safe_io.UnsafeInput, match="over the 1000-byte limit"):
        safe_io.read_bounded(path, 1000, "a test file")
