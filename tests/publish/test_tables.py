"""Reading a generated table back (attention_conformance/publish/tables.py, block) in a checkout made here: the
text between its markers exactly, so a table edited by hand no longer equals what its data renders to; a
file without its markers, or missing, is refused in one line before anything is written.
tests/publish/test_docs.py applies this to the committed docs and checks `put`."""

import pytest

from attention_conformance.publish import tables

DATA = {  # summary.json's content, as `publish` keeps it
    "rows": [["torch", "torch 2.13.0", "eager", "float32", "cpu ran", "12", "12", "0", "0.031", "0.50", "conforms"]],
    "measured_on": ["Some CPU, AVX2, 2 threads"],
    "finished": "2026-01-02T03:04:05",
    "spec_sha256": "ab" * 32,
}


def _readme(root, inside):
    where, begin, end = tables.BLOCKS["summary"]
    (root / where).parent.mkdir(parents=True, exist_ok=True)
    (root / where).write_text(f"# Title\n\nprose\n{begin}\n{inside}\n{end}\nmore prose\n{begin}\nlater\n{end}\n")


def test_a_block_is_the_text_between_the_first_markers_exactly(tmp_path):
    _readme(tmp_path, "line one\n\n| a | b |\nline three")
    assert tables.block("summary", tmp_path) == "line one\n\n| a | b |\nline three"


def test_a_table_edited_by_hand_no_longer_equals_what_its_data_renders_to(tmp_path):
    rendered = tables.summary_table(DATA)
    _readme(tmp_path, rendered)
    assert tables.block("summary", tmp_path) == rendered
    readme = tmp_path / tables.BLOCKS["summary"][0]
    readme.write_text(readme.read_text().replace("| 0.031", "| 0.030", 1))
    assert tables.block("summary", tmp_path) != rendered
    assert "0.030" in tables.block("summary", tmp_path)


def test_a_missing_file_or_lost_markers_are_refused_in_one_line(tmp_path):
    with pytest.raises(
        SystemExit, match=r"^error: no .*usage\.md: publish runs in the attention-conformance checkout$"
    ):
        tables.block("summary", tmp_path)
    where, begin, _ = tables.BLOCKS["summary"]
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text(f"{begin}\nthe end marker was deleted\n")
    with pytest.raises(SystemExit, match=r"usage\.md has no summary markers"):
        tables.block("summary", tmp_path)


def test_publishing_checks_every_files_markers_before_writing_any(tmp_path):
    _readme(tmp_path, "old table")
    before = (tmp_path / tables.BLOCKS["summary"][0]).read_text()
    # docs/speed.md and docs/portability.md are missing: nothing may be half published.
    with pytest.raises(SystemExit, match=r"^error: no "):
        tables.main(tmp_path / "reports", root=tmp_path)
    assert (tmp_path / tables.BLOCKS["summary"][0]).read_text() == before
    assert not (tmp_path / tables.RESULTS).exists()


def test_a_benchmark_or_portability_run_never_made_leaves_its_table_as_it_is(tmp_path):
    assert tables.benchmark_data(tmp_path) is None
    assert tables.portability_data(tmp_path) is None
