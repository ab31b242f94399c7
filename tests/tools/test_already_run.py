"""What the portability run need not run again (attention_conformance/tools/already_run.py): the adapter's own
whole run here only where it is this code, this spec, this framework version, this machine as it is; a setting only
where this CPU already is it."""

import datetime
import hashlib

import pytest

from attention_conformance import machine
from attention_conformance.paths import SPEC_DIR
from attention_conformance.run import reports
from attention_conformance.tools import already_run

SPEC = hashlib.sha256((SPEC_DIR / "attention.yaml").read_bytes()).hexdigest()


@pytest.fixture
def own(monkeypatch):
    """A report that stands for the as-is run, and the environment's version answering as its run's did. The test's
    own process runs as this machine is, whatever switches emulate another CPU around it (tox -e portability's AVX2)."""
    for name in machine.SWITCHES:
        monkeypatch.delenv(name, raising=False)
    report = {
        "adapter": "x",
        "version": "x 1.0",
        "complete": True,
        "spec_sha256": SPEC,
        "machine": machine.describe() | {"switches": {}},
        "devices": {"cpu": "ran", "gpu": "unavailable"},
        "finished": "2030-01-02T03:04:05",
        "tests": {},
    }
    monkeypatch.setattr(already_run, "_version", lambda name, python: "x 1.0")
    monkeypatch.setattr(already_run, "_last_change", lambda: datetime.datetime(2030, 1, 2, 3, 0).timestamp())
    return report


def test_the_adapters_own_whole_run_here_stands_for_the_as_is_run(monkeypatch, tmp_path, own):
    monkeypatch.setattr(reports, "runs", lambda directory: {"x": own})
    assert already_run.as_is_report("x", tmp_path) is own


@pytest.mark.parametrize(
    "differs",
    [
        {"complete": False},
        {"reruns": [{}]},  # a narrowed rerun on top
        {"published": True},
        {"spec_sha256": "other"},
        {"machine": {"threads": 1}},
        {"devices": {"cpu": "ran", "gpu": "ran"}},
        {"finished": "2020-01-01T00:00:00"},  # before the suite's, the adapters' or the spec's files last changed
        {"version": "x 0.9"},  # another framework version than the environment has now
    ],
)
def test_a_run_that_is_not_this_code_spec_version_or_machine_is_rerun(monkeypatch, tmp_path, own, differs):
    monkeypatch.setattr(reports, "runs", lambda directory: {"x": own | differs})
    assert already_run.as_is_report("x", tmp_path) is None


def test_a_run_under_a_switch_is_not_this_machine_as_it_is(monkeypatch, tmp_path, own):
    switched = machine.describe() | {"switches": {"OMP_NUM_THREADS": "1"}}
    monkeypatch.setattr(reports, "runs", lambda directory: {"x": own})
    monkeypatch.setattr(machine, "describe", lambda: switched)
    assert already_run.as_is_report("x", tmp_path) is None


def test_the_newest_file_of_the_suite_is_when_it_last_changed():
    assert already_run._last_change() >= (SPEC_DIR / "attention.yaml").stat().st_mtime
    assert already_run._finished({"finished": "not a time"}) == 0.0
