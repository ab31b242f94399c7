"""docs/known-bugs.md's reproducers, each run in its framework's environment as it stands (the framework and NumPy,
twelve lines at most, nothing of the suite) and printing what the page says; and every declared bug names its
section there or an upstream report."""

import re

import pytest

from attention_conformance.cases import divergences
from attention_conformance.paths import DOCS_DIR

PAGE = DOCS_DIR / "known-bugs.md"
# The framework each section's reproducer imports, as the adapter that runs it.
NEEDS = {"keras": "tensorflow", "onnxruntime": "onnxruntime"}


def _sections():
    text = PAGE.read_text()
    found = re.findall(r"^## (\w+)\n.*?```python\n(.*?)```\n```\n(.*?)```", text, re.S | re.M)
    assert len(found) == text.count("\n## "), "every section has a reproducer and what it prints"
    return found


def test_every_declared_bug_links_its_report_or_its_reproducer():
    bugs = {d.fact: d for d in divergences.read().values() if d.kind == "bug"}
    sections = {name for name, _, _ in _sections()}
    unlinked = sorted(
        fact for fact, d in bugs.items() if not any(f"known-bugs.md#{s}" in d for s in sections) and "/issues/" not in d
    )
    assert bugs and unlinked == []


def test_each_reproducer_prints_what_the_page_says(requested_adapter):
    ran = 0
    for name, code, printed in _sections():
        if NEEDS[name.split("_")[0]] != requested_adapter:
            continue
        assert len(code.strip().splitlines()) <= 12 and "attention_conformance" not in code, code
        lines = _printed(code, name)
        assert "\n".join(lines).strip() == printed.strip(), f"{name} now prints:\n" + "\n".join(lines)
        ran += 1
    if not ran:
        pytest.skip(f"no reproducer needs {requested_adapter}")


def _printed(code, name):
    """What `code` prints, each print's arguments joined by a space, as print does."""
    lines = []
    exec(compile(code, name, "exec"), {"print": lambda *said: lines.append(" ".join(map(str, said)))})
    return lines
