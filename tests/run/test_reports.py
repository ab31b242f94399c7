"""The reports folder: a run report written whole and read back; the start marker that replaces it while a run
is under way is never taken for a finished run; hold, restore and forget leave the folder as a user expects;
a report of another schema is refused, never mixed in."""

import errno

import pytest

from attention_conformance import writing
from attention_conformance.cases import loader
from attention_conformance.run import reports

SPEC = loader.load()
RESULT = {"outcome": "passed", "margin": 0.1, "ulp": 1.0, "worst": None, "message": None, "reason": None}


def _run(adapter="reference", **changes):
    """write_run's arguments for a complete run of one passed test, with `changes`."""
    return {
        "version": "numpy 2",
        "mode": {"name": "eager", "runs": "op by op"},
        "dtypes": ["float64"],
        "devices": {"cpu": "ran", "gpu": "unavailable"},
        "spec": SPEC,
        "spec_sha256": "abc123",
        "numerics": {},
        "complete": True,
        "expected": 1,
        "tests": {f"test_weights[{adapter}-float64-thermostat]": RESULT},
    } | changes


def _write(directory, adapter="reference", **changes):
    reports.write_run(directory, adapter, **_run(adapter, **changes))


def test_a_written_run_reads_back_with_its_outline_and_nothing_left_beside_it(tmp_path):
    _write(tmp_path, "my_pkg.adapter")
    assert [p.name for p in tmp_path.iterdir()] == ["my_pkg_adapter.json"]  # no .partial left behind
    report = reports.runs(tmp_path)["my_pkg.adapter"]
    assert report["schema"] == reports.SCHEMA and report["tests"] == {
        "test_weights[my_pkg.adapter-float64-thermostat]": RESULT
    }
    assert report["outline"]["families"] == list(SPEC.families)
    outline = {case_id: (family, convention) for case_id, family, convention in report["outline"]["cases"]}
    assert list(outline) == list(SPEC.cases)  # in the spec's order, as the matrix shows them
    assert outline["padding_fully_masked"] == ("causal and masks", True) and outline["sat"][1] is False
    assert reports.unfinished(report) is None


def test_runs_skips_the_other_files_of_the_folder(tmp_path):
    _write(tmp_path)
    reports.write_mutants(tmp_path, "reference", ["reference__no_scale"], {})
    (tmp_path / "matrix.json").write_text("{}")
    assert list(reports.runs(tmp_path)) == ["reference"]
    assert reports.mutants([tmp_path]) == (["reference__no_scale"], {})


def test_a_start_marker_is_an_unfinished_run_and_restore_puts_back_the_last_report(tmp_path):
    _write(tmp_path)
    before = (tmp_path / "reference.json").read_bytes()
    kept = reports.hold(tmp_path, ["reference", "new_adapter"])
    assert kept == ["reference", "new_adapter"]
    marker = reports.runs(tmp_path)["reference"]
    assert marker["complete"] is False and marker["tests"] == {}
    assert "never finished" in reports.unfinished(marker)
    found, stopped = reports.merge([tmp_path])
    assert found == {} and sorted(name for name, _ in stopped) == ["new_adapter", "reference"]
    reports.restore(tmp_path, kept)
    assert (tmp_path / "reference.json").read_bytes() == before
    assert not (tmp_path / "new_adapter.json").exists()  # it had no report before the run: it has none after
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.json"]  # nothing put aside is left


def test_a_killed_runs_marker_never_takes_the_place_of_the_last_finished_report(tmp_path):
    _write(tmp_path)
    before = (tmp_path / "reference.json").read_bytes()
    reports.hold(tmp_path, ["reference"])  # a run killed here leaves its marker
    reports.restore(tmp_path, reports.hold(tmp_path, ["reference"]))  # the next run stops before its report
    assert (tmp_path / "reference.json").read_bytes() == before


def test_two_runs_of_one_adapter_into_one_folder_leave_the_last_finished_report_whole(tmp_path):
    _write(tmp_path, expected=1)
    first, second = reports.hold(tmp_path, ["reference"]), reports.hold(tmp_path, ["reference"])
    _write(tmp_path, expected=2)  # the first run finishes
    reports.release(tmp_path, first)
    reports.restore(tmp_path, second)  # the second could not write its report: the first's stays
    assert reports.runs(tmp_path)["reference"]["expected"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.json"]


def test_a_report_that_cannot_be_written_leaves_the_last_finished_one(tmp_path, monkeypatch):
    _write(tmp_path)
    before = (tmp_path / "reference.json").read_bytes()
    held = reports.hold(tmp_path, ["reference"])

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writing.os, "open", full)
    with pytest.raises(writing.Refused, match=r"reference\.json: cannot write \(No space left on device\)"):
        _write(tmp_path, expected=3)
    monkeypatch.undo()
    reports.restore(tmp_path, held)
    assert (tmp_path / "reference.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.json"]


def test_a_folder_that_takes_no_marker_is_refused_with_nothing_changed(tmp_path, monkeypatch):
    _write(tmp_path)
    before = (tmp_path / "reference.json").read_bytes()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(writing.os, "open", read_only)
    with pytest.raises(writing.Refused, match="Read-only file system.*--reports"):
        reports.hold(tmp_path, ["reference", "other"])
    assert (tmp_path / "reference.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.json"]


def test_forget_deletes_the_report_and_its_wrong_adapter_record(tmp_path):
    _write(tmp_path)
    _write(tmp_path, "torch")
    reports.write_mutants(tmp_path, "reference", [], {})
    reports.forget(tmp_path, "reference")
    reports.forget(tmp_path, "never_ran")  # nothing to delete is no error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["torch.json"]


def test_merged_folders_name_each_column_by_adapter_version_and_device_at_host(tmp_path):
    _write(tmp_path / "a")
    _write(tmp_path / "b", "torch")
    found, stopped = reports.merge([tmp_path / "a", tmp_path / "b"])
    host = found[next(iter(found))]["host"]
    assert sorted(found) == [f"reference numpy 2 cpu@{host}", f"torch numpy 2 cpu@{host}"] and stopped == []
    _write(tmp_path / "b", "torch", spec_sha256="0ther")
    with pytest.raises(reports.ReportError, match="reports merge only when every machine ran the same spec"):
        reports.merge([tmp_path / "a", tmp_path / "b"])


@pytest.mark.parametrize("content", ['{"schema": 2, "adapter": "old"}', "[1, 2]", "not json"])
def test_a_report_of_another_schema_or_no_report_is_refused(tmp_path, content):
    (tmp_path / "old.json").write_text(content)
    with pytest.raises(reports.ReportError, match=r"old\.json: "):
        reports.runs(tmp_path)


def test_a_reports_folder_deleted_mid_run_is_made_again_for_the_report(tmp_path):
    folder = tmp_path / "reports"
    _write(folder)
    held = reports.hold(folder, ["reference"])
    for path in folder.iterdir():  # a user's cleanup while the tests run
        path.unlink()
    folder.rmdir()
    _write(folder, expected=5)
    reports.release(folder, held)
    assert reports.runs(folder)["reference"]["expected"] == 5 and [p.name for p in folder.iterdir()] == [
        "reference.json"
    ]


def _narrowed(directory, **changes):
    """A narrowed run of one test, written as the plugin writes it: on top of the last complete run where it can."""
    failed = {"test_weights[reference-float64-thermostat]": RESULT | {"outcome": "failed", "margin": None}}
    run = _run(complete=False, tests=failed) | changes
    held = reports.hold(directory, ["reference"])
    run, said = reports.on_top(directory, "reference", run)
    reports.write_run(directory, "reference", **run)
    reports.release(directory, held)
    return reports.runs(directory)["reference"], said


def test_a_narrowed_rerun_goes_on_top_of_the_last_complete_run_never_in_its_place(tmp_path):
    _write(
        tmp_path,
        tests={"test_weights[reference-float64-thermostat]": RESULT, "test_context[reference-float64-sat]": RESULT},
    )
    report, said = _narrowed(tmp_path)
    assert report["complete"] is True and "on top of the complete run of" in said
    assert report["tests"]["test_weights[reference-float64-thermostat]"]["outcome"] == "failed"  # the rerun's
    assert report["tests"]["test_context[reference-float64-sat]"] == RESULT  # the complete run's
    assert [r.get("tests") for r in report["reruns"]] == [None, ["test_weights[reference-float64-thermostat]"]]
    complete_run = report["reruns"][0]["complete_run_finished"]
    report, said = _narrowed(tmp_path)  # a second rerun names the complete run's time, not the first rerun's
    assert said.endswith(complete_run) and len(report["reruns"]) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.json"]


def test_a_rerun_after_the_adapter_changed_says_so_and_the_summary_asks_for_a_whole_run(tmp_path):
    """Issue 60's trial: after a fix and one test rerun, the summary still said "FAILED: 28 failed", the other 27 being
    the broken code's. Now the verdict says the results are mixed and gives the command."""
    from attention_conformance.publish import summary

    _write(tmp_path, adapter_sha256="before")
    report, said = _narrowed(tmp_path, adapter_sha256="before")  # the same code: stacking is sound
    assert reports.changed_since(report) is None and "changed" not in said
    report, said = _narrowed(tmp_path, adapter_sha256="after")
    assert reports.changed_since(report) == report["reruns"][0]["complete_run_finished"]
    assert "the adapter changed since" in said and "`attention-conformance run --adapter reference`" in said
    cells, problem = summary.row("reference", report)
    assert cells[-1] == problem and problem.startswith("MIXED: the adapter changed since its complete run of ")
    assert problem.endswith("`attention-conformance run --adapter reference` reruns it whole")
    assert reports.source_sha256(reports) == reports.source_sha256(reports) != reports.source_sha256(summary)


def test_a_narrowed_run_of_another_version_or_with_no_complete_run_is_marked_incomplete(tmp_path):
    report, said = _narrowed(tmp_path)  # nothing to put it on
    assert report["complete"] is False and "marked incomplete" in said
    _write(tmp_path)
    report, said = _narrowed(tmp_path, version="numpy 3")
    assert report["complete"] is False and "reruns" not in report
    assert "another version() 'numpy 2', now 'numpy 3'" in said  # which one: a user's own version() string counts
    assert said.endswith("`attention-conformance run --adapter reference` runs it whole")
