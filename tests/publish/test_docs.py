"""The tables the README and docs carry are generated (`attention-conformance publish`) and not stale:
each equals what its data in docs/results/ renders to, and that data was made from this spec and this
list of frameworks. After changing the spec or adding a framework: `tox -m conformance -p auto`, then
`attention-conformance publish` (and `tox -e benchmark` first for docs/speed.md)."""

import json
from pathlib import Path

import pytest

from attention_conformance import modes
from attention_conformance.contract import registry
from attention_conformance.publish import tables

ROOT = Path(__file__).resolve().parent.parent.parent


def _data(name):
    if name in tables.DATA_IN_CODE:
        return getattr(tables, f"{name}_data")()
    return json.loads((ROOT / tables.RESULTS / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(tables.BLOCKS))
def test_a_committed_table_is_what_its_data_renders_to(name):
    assert tables.block(name, ROOT) == tables.RENDER[name](_data(name)), (
        f"{tables.BLOCKS[name][0]}: the {name} table was edited by hand, or its data changed: "
        "run `attention-conformance publish`"
    )


def test_the_summary_table_was_made_from_this_spec_and_every_framework():
    data = _data("summary")
    assert data["spec_sha256"] == tables.spec_sha256(), (
        "spec/attention.yaml changed since docs/usage.md's summary table was made: run `tox -m conformance -p auto`, "
        "then `attention-conformance publish`"
    )
    assert data["adapters"] == [row[0] for row in data["rows"]], "the framework list changed"
    assert [a for a in data["adapters"] if modes.split(a)[1] is None] == list(registry.NAMES), "the framework list"
    assert all(row[-1].startswith("conforms") for row in data["rows"])


def test_the_benchmark_tables_measured_every_framework():
    assert sorted(r["adapter"] for r in _data("benchmark")["frameworks"]) == sorted(registry.NAMES), (
        "a framework was added or removed since docs/speed.md's tables: `tox -e benchmark`, "
        "then `attention-conformance publish`"
    )


def test_publishing_replaces_only_the_blocks_and_writes_nothing_without_markers(tmp_path):
    for name, (path, begin, end) in tables.BLOCKS.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(f"before\n{begin}\nold\n{end}\nafter\n")
        tables.put(name, "new table", tmp_path)
        assert (tmp_path / path).read_text() == f"before\n{begin}\nnew table\n{end}\nafter\n"
        (tmp_path / path).write_text("no markers\n")
        with pytest.raises(SystemExit, match=f"no {name} markers"):
            tables.put(name, "new table", tmp_path)
        assert (tmp_path / path).read_text() == "no markers\n"


def test_publishing_refuses_an_incomplete_run_in_one_line(tmp_path):
    (tmp_path / "reports").mkdir()
    with pytest.raises(
        SystemExit, match=r"^error: .*not a complete, conforming run of every built-in adapter \(\w+: MISSING"
    ):
        tables.summary_data(tmp_path / "reports")


def test_the_shipped_published_reports_are_the_summary_tables_run():
    """What `summary --with-published` puts beside a user's reports: the README table's run, every column of it,
    finished, complete and made from the installed spec (else the merge would refuse it)."""
    from attention_conformance.paths import PUBLISHED_DIR
    from attention_conformance.run import reports

    found = reports.runs(PUBLISHED_DIR)
    assert sorted(found) == sorted(_data("summary")["adapters"]), "run `attention-conformance publish`"
    for column, report in found.items():
        assert report["complete"] and "finished" in report, column
        assert report["spec_sha256"] == tables.spec_sha256(), f"{column}: run `attention-conformance publish`"


def test_publishing_names_a_published_column_the_run_lacks(tmp_path):
    """A run of the first tier alone has no compiled columns: publishing it used to delete theirs from the page."""
    from attention_conformance.run import reports

    for column in ("torch", "torch-compiled"):
        (tmp_path / f"{column}.json.gz").write_bytes(b"")
    assert reports.unpublished(tmp_path, ["torch"]) == ["torch-compiled"]
    assert reports.unpublished(tmp_path, ["torch", "torch-compiled"]) == []
