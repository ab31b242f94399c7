"""The pytest plugin (attention_conformance/plugin.py) refuses to go green by accident: every path below must exit
non-zero."""

import subprocess
import sys
from pathlib import Path

import pytest
from spec_samples import MALFORMED, VALID

from attention_conformance import cli
from attention_conformance.cases import loader
from attention_conformance.paths import CONFORMANCE_TESTS

ROOT = Path(__file__).resolve().parent.parent


def validate(argv):
    return cli.main(["validate", *argv])


MUTANT = "tests.mutants.reference__no_scale"


@pytest.fixture
def run_pytest(tmp_path):
    """pytest in a fresh process, reporting into a scratch folder: never over the real reports/."""

    def run(*args, env=None):
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--reports",
            str(tmp_path / "reports"),
            *args,
        ]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
        return done.returncode, done.stdout + done.stderr

    return run


def _divergences(tmp_path, test_id):
    path = tmp_path / "divergences.yaml"
    path.write_text(f'"{test_id}":\n  reason: the test of the mechanism\n')
    return str(path)


def test_a_known_divergence_is_an_expected_failure(tmp_path, run_pytest):
    listed = _divergences(tmp_path, f"test_scaled[{MUTANT}-float64-row_scale_binary]")
    code, out = run_pytest(
        "--adapter", MUTANT, str(CONFORMANCE_TESTS), "--known-divergences", listed, "-k", "row_scale_binary"
    )
    assert code == 0, out[-1500:]
    assert "1 xfailed" in out


def test_a_listed_divergence_that_passes_fails_the_run(tmp_path, run_pytest):
    listed = _divergences(tmp_path, "test_scaled[reference-float64-row_scale_binary]")
    code, out = run_pytest(
        "--adapter", "reference", str(CONFORMANCE_TESTS), "--known-divergences", listed, "-k", "row_scale_binary"
    )
    assert code == 1 and f"declared divergence now conforms: remove it from {listed}" in out, out[-1500:]


def test_a_listed_divergence_that_matches_no_test_fails_the_run(tmp_path, run_pytest):
    listed = _divergences(tmp_path, "test_scaled[reference-float64-row_scale_renamed]")
    code, out = run_pytest("--adapter", "reference", str(CONFORMANCE_TESTS), "--known-divergences", listed)
    assert code == 1 and "match no test" in out and "row_scale_renamed" in out, out[-1500:]


def test_a_requested_adapter_that_does_not_import_fails_in_one_line(run_pytest):
    code, out = run_pytest("--adapter", "no_such_framework", str(CONFORMANCE_TESTS))
    assert code == 4
    assert "adapter 'no_such_framework' was requested but does not import" in out


def test_a_run_that_loses_cases_fails(tmp_path, run_pytest):
    """A plugin that silently drops tests (as a buggy filter would): the count check catches it."""
    (tmp_path / "drop_cases.py").write_text("def pytest_collection_modifyitems(items):\n    del items[10:]\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    code, out = run_pytest("--adapter", "reference", str(CONFORMANCE_TESTS), "-p", "drop_cases", env=env)
    assert code == 1 and "ran 10 of" in out, out[-1500:]


def test_a_malformed_spec_stops_pytest_in_one_line(tmp_path, run_pytest):
    path = tmp_path / "broken.yaml"
    path.write_text(VALID.replace("op: softmax", "op: softmin"))
    code, out = run_pytest("--adapter", "reference", "--spec", str(path), str(CONFORMANCE_TESTS))
    assert code == 4
    assert f"{path}: case 'sat': field 'op'" in out


def test_a_spec_with_no_cases_is_refused(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text(VALID[: VALID.index("cases:")] + "cases: []\n")
    with pytest.raises(loader.SpecError, match="field 'cases': must be a non-empty list"):
        loader.load_file(path)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_the_validate_command_exits_non_zero_on_every_malformed_spec(tmp_path, capsys, name):
    old, new, fragments = MALFORMED[name]
    path = tmp_path / "broken.yaml"
    path.write_text(VALID.replace(old, new, 1))
    assert validate([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(f in err for f in fragments)


def test_the_validate_command_as_a_process():
    run = subprocess.run(
        [sys.executable, "-m", "attention_conformance", "validate"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.startswith("ok:")
    run = subprocess.run(
        [sys.executable, "-m", "attention_conformance", "validate", "--golden-dir", "/nonexistent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "MANIFEST.json" in run.stderr


def test_a_conformance_run_drops_the_last_reports_and_a_self_check_run_keeps_the_conformance_one(tmp_path, run_pytest):
    """The main job and the self-checks are separate runs: neither may leave the other's stale
    record standing for it (a run that dies shows as missing), nor delete what the other just wrote."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("reference.json", "mutants-reference.json"):
        (folder / name).write_text("{}")
    code, out = run_pytest("--adapter", "reference", "tests/selfcheck/test_adapter.py", "-k", "registry")
    assert code == 0, out[-1500:]
    assert (folder / "reference.json").read_text() == "{}", "a self-check run deleted the conformance report"
    assert (folder / "mutants-reference.json").read_text() != "{}", "a self-check run left the last kill rate standing"
    (folder / "mutants-reference.json").write_text("{}")
    code, out = run_pytest("--adapter", "reference", str(CONFORMANCE_TESTS), "-k", "row_scale_binary")
    assert code == 0, out[-1500:]
    assert (folder / "reference.json").read_text() != "{}"
    assert not (folder / "mutants-reference.json").exists(), "a conformance run left a kill rate measured before it"


def test_no_test_reads_the_wall_clock():
    """A wall-clock bound fails on a slower or busier machine: tests bound CPU time or memory, and
    speed is the benchmark's (attention-conformance benchmark)."""
    clocks = ("perf_" + "counter", "time." + "time(", "mono" + "tonic(")  # joined here, so this line is not a match
    found = [
        f"{p.name}:{n}"
        for p in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if any(c in line for c in clocks)
    ]
    assert found == []


def test_k_selects_a_family_or_an_op_by_its_words(run_pytest):
    """`-k soft_capping` (a family's words joined by underscores) and `-k sink_attention` (an op) select exactly
    that family's or op's tests; the ids stay the case's."""
    spec = loader.load()
    for selector, wanted in (
        ("soft_capping", {c.id for c in spec.cases.values() if c.family == "soft-capping"}),
        ("sink_attention", {c.id for c in spec.cases.values() if "sink_attention" in c.op}),
    ):
        code, out = run_pytest("--adapter", "reference", str(CONFORMANCE_TESTS), "--collect-only", "-k", selector)
        collected = {line.rsplit("-", 1)[1].rstrip("]") for line in out.splitlines() if "::test_" in line}
        assert code == 0 and collected == wanted, (selector, out[-1500:])
