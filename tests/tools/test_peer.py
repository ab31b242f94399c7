"""The benchmark's hand-written peer (tools/peer.py): a plain pytest file that makes the suite's calls and checks
the outputs the suite passed, and fails where an output is wrong; its figures come from `tox -e benchmark`."""

import json

import numpy as np

from attention_conformance.cases import loader, plan
from attention_conformance.contract import registry
from attention_conformance.tools import peer


def _report(folder, cases, outcome="passed"):
    spec = loader.load()
    tests = {
        t.id: {"outcome": outcome}
        for t in plan.tests(spec, {"reference": registry.load("reference")})
        if t.case.id in cases
    }
    folder.mkdir(exist_ok=True)
    (folder / "reference.json").write_text(json.dumps({"tests": tests}))
    return folder / "reference.json", len(tests)


def test_the_peer_checks_what_the_suite_passed_and_passes_on_a_conforming_adapter(tmp_path):
    report, suite_tests = _report(tmp_path, {"sat", "thermostat", "dropout_p50"})
    count = peer.write("reference", report, tmp_path / "peer")
    wall, times, exit_code = peer.run(tmp_path / "peer")
    assert exit_code == 0 and times["failed"] == 0 and times["tests"] == count
    assert 0 < count < suite_tests  # dropout's outputs are random: checked by statistics, not in the peer
    assert times["inside_s"] <= times["in_tests_s"] <= wall


def test_the_peer_fails_a_wrong_output_and_leaves_out_what_the_suite_did_not_pass(tmp_path):
    assert peer.write("reference", _report(tmp_path / "failed", {"sat"}, "failed")[0], tmp_path / "none") == 0
    report, _ = _report(tmp_path / "passed", {"sat"})
    peer.write("reference", report, tmp_path / "peer")
    calls = json.loads((tmp_path / "peer" / "calls.json").read_text())
    with np.load(tmp_path / "peer" / "out0.npz") as stored:
        answers = {name: stored[name] for name in stored.files}
    name = sorted(answers)[0]
    np.savez(tmp_path / "peer" / "out0.npz", **answers | {name: answers[name] + 0.5})
    _, times, exit_code = peer.run(tmp_path / "peer")
    assert exit_code == 1 and times["failed"] == 1, calls["calls"][0]


def test_the_peer_imports_a_users_own_adapter_from_where_it_lives(tmp_path, monkeypatch):
    from attention_conformance.tools import template

    (tmp_path / "someones_adapter.py").write_text(template.text("reference"))
    monkeypatch.syspath_prepend(str(tmp_path))
    report, _ = _report(tmp_path / "report", {"sat"})
    report.write_text(report.read_text().replace("[reference-", "[someones_adapter-"))
    assert peer.write("someones_adapter", report, tmp_path / "peer") > 0
    _, times, exit_code = peer.run(tmp_path / "peer")
    assert exit_code == 0 and times["failed"] == 0 and times["tests"] > 0
