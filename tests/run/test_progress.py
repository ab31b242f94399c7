"""The first run's progress line (issue 54): said on stderr while the oracle computes, never on a warm run."""

import re

import pytest

from attention_conformance import plugin
from attention_conformance.run import calls, launch, progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _progress(wanted):
    said, clock = [], Clock()
    return progress.Progress(wanted, said.append, clock), said, clock


def test_answers_all_read_from_the_cache_say_nothing():
    p, said, _ = _progress({"float32": {"a", "b"}})
    for case in ("a", "b"):
        p.asked_for(case, "float32", computed=False)
        p.flush()
    assert said == []


def test_a_computed_answer_is_said_at_once_then_at_most_every_few_seconds_and_at_the_last_case():
    p, said, clock = _progress({"float32": {"a", "b", "c", "d"}, "float16": {"a"}})
    p.asked_for("a", "float32", computed=True)
    p.flush()
    assert said == ["computing the oracle's answers for 4 cases in float32: 1 of 4"]
    p.asked_for("b", "float32", computed=False)  # read, but the dtype is being computed: counted
    clock.now += progress.EVERY_S / 2
    p.flush()
    assert len(said) == 1  # too soon
    clock.now += progress.EVERY_S
    p.flush()
    assert said[-1].endswith("2 of 4")
    p.asked_for("c", "float32", computed=True)
    p.asked_for("d", "float32", computed=True)
    p.flush()  # the last case is said however soon
    assert said[-1].endswith("4 of 4")
    p.asked_for("a", "float16", computed=False)
    p.asked_for("zz", "float16", computed=True)  # not a case this run asks the oracle for
    p.flush()
    assert said[-1].endswith("4 of 4") and len(said) == 3


def test_outside_a_session_nothing_is_planned_and_nothing_said(monkeypatch):
    monkeypatch.setattr(progress, "current", None)
    progress.asked_for("a", "float32", computed=True)
    progress.flush()  # no error, no line


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_a_run_says_how_far_the_oracle_is_on_stderr_when_it_computes(tmp_path, monkeypatch, capfd, cache):
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    narrowed = ["-q", "-k", "causal and not gpt2 and not decoder", "--reports", str(tmp_path / "reports")]
    for _ in range(1 if cache == "cold" else 2):
        monkeypatch.setattr(plugin, "state", plugin.State())
        capfd.readouterr()
        try:
            assert launch.run(["reference"], narrowed) == 0
        finally:
            calls.forget()
    out, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("computing the oracle's answers")]
    if cache == "warm":
        assert lines == []
    else:
        assert lines and re.fullmatch(r"computing the oracle's answers for (\d+) cases in float64: \1 of \1", lines[-1])
        assert "computing" not in out  # stderr's, not the report's
    assert progress.current is None  # the session's own, gone with it
