"""The summary (attention_conformance/publish/summary.py) over a reports folder written by run/reports.py's
own writer: exit 0 only when every adapter ran completely and conformed; a failing, unfinished or missing
adapter fails the verdict, which is the last line printed. And the kill rate of the wrong adapters."""

from types import SimpleNamespace

from spec_samples import write_finished_run

from attention_conformance.publish import summary
from attention_conformance.run import reports, root_cause

SPEC = SimpleNamespace(  # what reports.outline reads of a spec: one family of two cases
    families=("document values",),
    cases={c: SimpleNamespace(id=c, family="document values", convention=None) for c in ("sat", "cat")},
)


def _result(outcome, margin=None, message=None):
    return {"outcome": outcome, "margin": margin, "ulp": None, "message": message, "reason": None}


def _run(directory, adapter, **outcomes):
    """A finished run of `adapter` in float32, one test per case: {case: outcome}."""
    tests = {
        f"test_context[{adapter}-float32-{case}]": _result(o, 0.1, "off by 1e-3" if o == "failed" else None)
        for case, o in outcomes.items()
    }
    write_finished_run(directory, adapter, SPEC, tests, adapter.rpartition("-")[2] if "-" in adapter else "eager")


def _cells(line):
    return [cell.strip() for cell in line.strip("| ").split("|")]


def _summary(tmp_path, capsys, names=None):
    """(exit code, stdout, the verdict): the last line printed, on stderr when it fails."""
    code = summary.main([tmp_path / "reports"], names=names, out=tmp_path / "out")
    said = capsys.readouterr()
    return code, said.out, (said.err if code else said.out).strip().splitlines()[-1]


def test_every_adapter_conforming_exits_0_and_writes_the_matrix_and_the_page(tmp_path, capsys):
    _run(tmp_path / "reports", "reference", sat="passed", cat="passed")
    _run(tmp_path / "reports", "torch", sat="passed", cat="diverged")
    code, out, verdict = _summary(tmp_path, capsys, names=["reference", "torch"])
    assert code == 0, out
    assert verdict == (  # torch's divergence has no kind (an older report): its case states none, so a known bug
        "conforms: reference, torch (2 adapter(s)); excused without a bound: 1 tests (0 by another convention, 1 known "
        "bugs, 0 at a declared precision with no bound there); judged by their declarations: 0 at a declared "
        "precision, 0 raised as declared, 0 on a declared side"
    )
    torch = next([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if "| torch " in line)
    assert (
        " | ".join(torch)
        == "torch | torch 1.0 | eager | float32 | cpu ran | 2 | 1 | 0 | 0.100 | - | conforms (1 known bugs)"
    )
    assert {"matrix.md", "matrix.json", "index.html"} <= {p.name for p in (tmp_path / "out").iterdir()}


def test_a_failing_adapter_exits_1_naming_its_first_failure(tmp_path, capsys):
    _run(tmp_path / "reports", "reference", sat="passed", cat="passed")
    _run(tmp_path / "reports", "torch", sat="passed", cat="failed")
    code, out, verdict = _summary(tmp_path, capsys)
    assert code == 1
    assert verdict.startswith("FAILED: torch: 1 failed; root cause: test_context[torch-float32-cat]: off by 1e-3; ")
    assert verdict.endswith(f"to judge your own tensors: {root_cause.EXPLAIN}")
    assert "FAILED: 1 failed (read first: test_context[torch-float32-cat])" in out


def test_an_adapter_asked_for_without_a_report_or_whose_run_died_is_missing_and_exits_1(tmp_path, capsys):
    _run(tmp_path / "reports", "reference", sat="passed", cat="passed")
    code, out, verdict = _summary(tmp_path, capsys, names=["reference", "jax"])
    assert code == 1
    assert verdict.startswith("FAILED: jax: MISSING: no report named 'jax' (the reports are of reference)")
    reports.hold(tmp_path / "reports", ["reference"])  # a run started and never finished: its last report is gone
    code, out, verdict = _summary(tmp_path, capsys, names=["reference"])
    assert code == 1 and verdict.startswith("FAILED: reference: MISSING: started ")
    assert "never finished" in verdict


def test_an_adapters_other_modes_are_its_columns_shown_beside_it_and_a_dead_one_fails(tmp_path, capsys):
    _run(tmp_path / "reports", "torch", sat="passed")
    _run(tmp_path / "reports", "torch-compiled", sat="failed")
    _run(tmp_path / "reports", "jax", sat="passed")
    code, out, verdict = _summary(tmp_path, capsys, names=["torch"])  # asked for torch: every column of torch
    rows = {cells[0]: cells[2] for line in out.splitlines() if "cpu ran" in line for cells in [_cells(line)]}
    assert rows == {"torch": "eager", "torch-compiled": "compiled"}  # the mode column; jax was not asked for
    assert code == 1 and verdict.startswith(
        "FAILED: torch-compiled: 1 failed; root cause: test_context[torch-compiled-float32-sat]"
    )
    reports.hold(tmp_path / "reports", ["torch-compiled"])
    code, out, verdict = _summary(tmp_path, capsys, names=["torch"])
    assert code == 1 and verdict.startswith("FAILED: torch-compiled: MISSING: started ")


def test_the_kill_rate_counts_wrong_adapters_caught_and_names_those_that_were_not(tmp_path):
    assert summary.kill_rate([tmp_path]) == (None, [], []), "an outside run has no wrong adapters of its own"
    caught = [f"test_context[reference__no_scale-float64-case{i}]" for i in range(5)]
    reports.write_mutants(
        tmp_path,
        "reference",
        ["reference__no_scale", "reference__one_ulp_off", "reference__reordered_sum", "reference__never_run"],
        {
            "reference__no_scale": {"expected": "caught", "cases": 9, "caught_by": caught},
            "reference__one_ulp_off": {"expected": "caught", "cases": 9, "caught_by": []},
            "reference__reordered_sum": {"expected": "passes", "cases": 9, "caught_by": []},
        },
    )
    headline, rows, wrong = summary.kill_rate([tmp_path])
    assert headline == "Wrong adapters caught (kill rate): 1 of 2, 50%"
    by_name = {r[0]: r[1:] for r in rows}
    assert by_name["reference__no_scale"] == [
        "must fail",
        "caught by test_context[float64-case0], test_context[float64-case1], test_context[float64-case2] "
        "and 2 more (5 of 9)",
        True,
    ]
    assert by_name["reference__reordered_sum"] == ["must pass", "passed all 9", True]
    assert by_name["reference__never_run"][2] is False
    assert wrong == ["reference__never_run not run", "reference__one_ulp_off not caught"]


def test_with_published_puts_the_shipped_run_beside_a_users_own_marked_as_published(tmp_path, capsys):
    import gzip

    from attention_conformance import cli
    from attention_conformance.paths import PUBLISHED_DIR

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "reference.json").write_bytes(
        gzip.decompress((PUBLISHED_DIR / "reference.json.gz").read_bytes())
    )
    code = cli.main(
        ["summary", "--reports", str(tmp_path / "mine"), "--with-published", "--out", str(tmp_path / "out")]
    )
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    published = [line for line in out.splitlines() if line.startswith("| torch-compiled ") and "@published 20" in line]
    assert len(published) == 1, out[-3000:]
    assert any(line.startswith("| reference ") and "@published" not in line for line in out.splitlines())
    # --adapter asks for the user's own columns; the published ones stay beside them and never stand in for one
    code = cli.main(
        [
            "summary",
            "--reports",
            str(tmp_path / "mine"),
            "--with-published",
            "--adapter",
            "reference",
            "--out",
            str(tmp_path / "o2"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and sum("@published 20" in line for line in out.splitlines() if line.startswith("| ")) >= 12, out[
        -3000:
    ]
    code = cli.main(
        [
            "summary",
            "--reports",
            str(tmp_path / "mine"),
            "--with-published",
            "--adapter",
            "torch",
            "--out",
            str(tmp_path / "o3"),
        ]
    )
    assert code == 1 and "MISSING" in capsys.readouterr().out


def test_the_terminal_gets_the_matrix_folded_to_families_and_is_told_where_the_full_one_is(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the files named relative to it, as `attention-conformance summary` names reports/
    _run(tmp_path / "reports", "reference", sat="passed", cat="passed")
    _run(tmp_path / "reports", "torch", sat="passed", cat="failed")
    code = summary.main([tmp_path / "reports"], out="out")
    out = capsys.readouterr().out
    shown = out[out.index("\nConformance matrix (") :].strip().splitlines()
    assert code == 1 and max(map(len, shown)) <= 120, max(shown, key=len)
    assert "document values (2)  ok 0.10    FAIL 1" in shown, "a column per framework, a row per family"
    assert shown[-2:] == [
        "The full matrix, a row per case and a column per framework and dtype: out/matrix.md",
        "and on the page, each cell's tests a click away: out/index.html",
    ]
