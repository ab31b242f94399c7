"""The conformance page (attention_conformance/publish/page.py) as a file, without a browser: one self-contained
HTML file whose data is inline JSON that parses back to what the reports said, a message quoting `</script>`
included; a figure JSON cannot hold (an infinite ULP, a NaN) never stops the page being written.
tests/publish/test_page.py opens the page in a real browser."""

import json
import math
import re

from attention_conformance.publish import matrix, page

HOSTILE = "</script><img id=injected src=x onerror=alert(1)> is text"
OUTLINE = {"families": ["document values"], "cases": [["sat", "document values", False]]}
WORST = {"element": [0, 1], "got": math.nan, "expected": 0.5, "error": math.inf, "allowed": 1e-6}
WORST |= {"tolerance": "float32 rounding", "from": "the golden file"}


def _found():
    tests = {
        "test_weights[mine-float32-sat]": {"outcome": "passed", "margin": 0.123456, "ulp": math.inf, "worst": None},
        "test_context[mine-float32-sat]": {"outcome": "failed", "margin": 7.0, "message": HOSTILE, "worst": WORST},
    }
    report = {"adapter": "mine", "dtypes": ["float32"], "tests": tests, "finished": "2026-01-02T03:04:05"}
    return {"mine": report | {"spec_sha256": "ab" * 32}}


def _written(tmp_path):
    found = _found()
    content = page.data(
        summary={"header": ["framework"], "rows": [["mine"]], "conforming": [False], "notes": []},
        verdict={"conforms": False, "line": "FAILED: mine"},
        measured_on=["Some CPU"],
        kill=None,
        built=matrix.build(found, OUTLINE, ["jax"]),
        found=found,
        directories=[tmp_path],
    )
    path = page.write(content, tmp_path)  # a folder: the page is index.html in it
    assert path == tmp_path / "index.html"
    return path.read_text(encoding="utf-8")


def _data(html):
    scripts = re.findall(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    assert len(scripts) == 1, "the data ends at the first </script>: a message must not end it early"
    return json.loads(scripts[0])


def test_the_page_is_one_file_with_nothing_to_fetch(tmp_path):
    html = _written(tmp_path)
    assert page.PLACEHOLDER not in html
    assert not re.search(r"<(link|img|iframe)\b|<script[^>]*\bsrc=", html), "the style, script and data are inline"
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"], "nothing beside it, no partial file left"


def test_the_inline_data_parses_back_to_what_the_reports_said_a_script_tag_in_a_message_included(tmp_path):
    data = _data(_written(tmp_path))
    assert data["verdict"] == {"conforms": False, "line": "FAILED: mine"}
    assert [c["name"] for c in data["columns"]] == ["mine float32", "jax"]
    ((family, case, (cell, missing)),) = data["rows"]
    assert (family, case, missing) == ("document values", "sat", ["missing", None, None, []])
    status, margin, _, tests = cell
    assert (status, margin) == ("failed", 7.0)
    by_output = {t[0]: t for t in tests}
    assert data["outcomes"][by_output["context"][1]] == "failed"
    assert data["strings"][by_output["context"][4]] == HOSTILE
    # The figures as shown: 4 significant digits; an infinite ULP or error is null, a NaN got is text.
    assert by_output["weights"][2:4] == [0.1235, None]
    element, got, expected, error, *_ = by_output["context"][6]
    assert (element, got, expected, error) == ([0, 1], "nan", 0.5, None)


def test_a_benchmark_report_that_cannot_be_read_is_said_on_the_page_not_raised(tmp_path):
    (tmp_path / "benchmark.json").write_text('{"frameworks": [{"adapter": "x"}]}')
    (benchmark,) = _data(_written(tmp_path))["benchmarks"]
    assert benchmark["folder"] == str(tmp_path)
    (kind, line), *_ = benchmark["blocks"]
    assert kind == "p" and "is not a report of `tox -e benchmark` (KeyError" in line


def test_a_failure_that_raised_shows_its_message_and_no_worst_element():
    """Its report keeps only its op and convention (run/root_cause.py); the page's script read that as an element."""
    raised = {"outcome": "failed", "margin": None, "message": "mine float32: project() raised KeyError"}
    shown = page._test("context", raised | {"worst": {"op": "project", "convention": None}}, lambda s: s)
    assert shown[6] == 0 and shown[4] == raised["message"]  # 0: no worst element (a string index elsewhere)
