"""Launching the packaged conformance tests: a node id as a run prints it, or a test id as a report keys it,
names a test of the installed conformance file; an option's value stays as written; the run is isolated
from the caller's pytest configuration. And one tiny run of the reference, narrowed with -k, passes."""

import json
import os
import types

import pytest

from attention_conformance import plugin
from attention_conformance.paths import CONFORMANCE_TESTS
from attention_conformance.run import calls, launch

TEST_ID = "test_weights[reference-float64-thermostat]"


@pytest.fixture
def launched(monkeypatch):
    """The arguments run() hands pytest, without running it."""
    given = []
    monkeypatch.setattr(pytest, "main", lambda args, plugins: given.append(args) or 0)

    def run(pytest_args):
        assert launch.run(["reference"], pytest_args) == 0
        return given.pop()

    return run


@pytest.mark.parametrize("arg", [f"attention_conformance/conformance.py::{TEST_ID}", TEST_ID])
def test_a_printed_node_id_or_a_test_id_names_the_installed_file(launched, arg):
    args = launched(["-q", arg])
    assert args[-1] == f"{CONFORMANCE_TESTS}::{TEST_ID}"
    assert str(CONFORMANCE_TESTS) not in args[:-1]  # the node alone: not the whole file as well


def test_option_values_stay_as_written_and_the_whole_file_runs(launched):
    node = f"attention_conformance/conformance.py::{TEST_ID}"
    args = launched(["-k", TEST_ID, "--deselect", node])
    assert args[-6:] == [str(CONFORMANCE_TESTS), "--adapter=reference", "-k", TEST_ID, "--deselect", node]


def test_the_run_ignores_the_callers_pytest_configuration(launched):
    args = launched([])
    assert args[args.index("-c") + 1] == os.devnull and args[args.index("-W") + 1] == "error"
    assert args[args.index("--rootdir") + 1] == os.getcwd()
    assert "attention_conformance.plugin" in args and "no:cacheprovider" in args


def test_a_run_of_one_reference_test_passes_and_reports_where_it_was_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plugin, "state", plugin.State())  # the plugin's session state, this run's alone
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    reports = tmp_path / "reports"
    narrowed = ["-q", "-k", "weights and float64 and thermostat and not x8 and not x2000", "--reports", str(reports)]
    try:
        assert launch.run(["reference"], narrowed) == 0
    finally:
        calls.forget()  # its outputs are keyed by its Goldens' id, which a later test's Goldens may reuse
    assert "1 passed" in capsys.readouterr().out
    report = json.loads((reports / "reference.json").read_text())
    assert report["complete"] is False  # narrowed by -k: no summary may count it as a whole run
    assert {tid: r["outcome"] for tid, r in report["tests"].items()} == {TEST_ID: "passed"}
    assert {p.name for p in tmp_path.iterdir()} <= {"cache", "reports"}  # nothing else left where it ran


@pytest.mark.parametrize(
    "option, narrowed",
    [({}, False), ({"keyword": "sat"}, True), ({"markexpr": "slow"}, True), ({"deselect": ["x"]}, True)],
)
def test_a_run_narrowed_by_pytests_own_arguments_is_told_apart_from_a_whole_one(option, narrowed):
    settings = {"keyword": "", "markexpr": "", "deselect": [], "maxfail": 0} | option
    config = types.SimpleNamespace(option=types.SimpleNamespace(**settings), args=[str(CONFORMANCE_TESTS)])
    assert launch.is_narrowed(config) is narrowed
    assert launch.runs_conformance(config)
    config.args = [f"{CONFORMANCE_TESTS}::{TEST_ID}"]
    assert launch.is_narrowed(config) and launch.runs_conformance(config)
    config.args = ["tests/test_modes.py"]
    assert not launch.runs_conformance(config)


def test_lf_reruns_what_the_last_report_holds_as_not_passed_and_everything_where_nothing_failed(
    launched, tmp_path, monkeypatch, capsys
):
    """pytest's --lf needs the cache an isolated run does without: a newcomer's first try at rerunning the failures
    (issue 60's trial) got "unrecognized arguments: --lf"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    outcomes = {TEST_ID: "failed", "test_context[reference-float64-sat]": "passed"}
    tests = {t: {"outcome": o} for t, o in outcomes.items()}
    (tmp_path / "reports" / "reference.json").write_text(json.dumps({"tests": tests}))
    args = launched(["-q", "--lf"])
    assert args[-1] == f"{CONFORMANCE_TESTS}::{TEST_ID}" and "--lf" not in args
    (tmp_path / "reports").rename(tmp_path / "mine")  # --reports DIR and --reports=DIR, as pytest takes either
    for given in (["--reports", "mine"], ["--reports=mine"]):
        assert launched([*given, "--lf"])[-1] == f"{CONFORMANCE_TESTS}::{TEST_ID}"
    (tmp_path / "mine").rename(tmp_path / "reports")
    tests[TEST_ID]["outcome"] = "passed"
    (tmp_path / "reports" / "reference.json").write_text(json.dumps({"tests": tests}))
    args = launched(["--last-failed"])
    assert str(CONFORMANCE_TESTS) in args and "every test runs" in capsys.readouterr().err
