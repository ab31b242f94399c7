"""attention-conformance portability: an outcome that changes with a kernel switch fails the run."""

import json

import numpy as np
import pytest

from attention_conformance.tools import emulation

ADAPTER = '''"""The reference, but wrong on one thread: a result that depends on the machine."""
import os
import numpy as np
from attention_conformance.adapters.reference import *  # noqa: F403 - the reference, one function replaced
from attention_conformance.adapters import reference


def attention(x, w_query, w_key, w_value):
    out = reference.attention(x, w_query, w_key, w_value)
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        out["context"] = np.asarray(out["context"]) * (1 + 1e-6)
    return out
'''


def _report(margins, outcomes):
    return {"tests": {t: {"outcome": outcomes.get(t, "passed"), "margin": m} for t, m in margins.items()}}


def test_compare_names_changed_outcomes_margins_near_the_edge_and_what_each_setting_moved():
    runs = {
        "as-is": _report({"a": 0.1, "b": 0.5}, {}),
        "1 thread": _report({"a": 0.1, "b": 0.75}, {}),
        "AVX2": _report({"a": 0.2, "b": 1.3}, {"b": "failed"}),
    }
    result = emulation.compare(runs)
    assert result["tests"] == 2
    assert result["changed"] == [("b", {"as-is": "passed", "1 thread": "passed", "AVX2": "failed"})]
    assert [t for t, _ in result["watch"]] == ["b"]
    assert result["moved"] == {"1 thread": 1, "AVX2": 2}


def test_a_result_that_depends_on_the_thread_count_fails_the_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "thread_dependent.py").write_text(ADAPTER)
    monkeypatch.chdir(tmp_path)
    assert emulation.main(adapter="thread_dependent", pytest_args=["-k", "sat"]) == 1
    out = capsys.readouterr().out
    assert "OUTCOME CHANGED test_context[thread_dependent-float64-" in out, out
    assert "1 thread failed" in out and "as-is passed" in out, out
    written = json.loads((tmp_path / "reports" / "portability.json").read_text())
    assert written["results"][0]["changed"] and written["machine"]["threads"] >= 1


def test_the_same_adapter_without_its_dependence_passes(tmp_path, monkeypatch, capsys):
    (tmp_path / "thread_independent.py").write_text(
        ADAPTER.replace('os.environ.get("OPENBLAS_NUM_THREADS") == "1"', "False")
    )
    monkeypatch.chdir(tmp_path)
    assert emulation.main(adapter="thread_independent", pytest_args=["-k", "sat"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("label", sorted(emulation.SETTINGS))
def test_each_setting_is_recorded_by_the_run_it_changes(label):
    """Every switch a setting sets is one machine.py records, so a report says which were set."""
    from attention_conformance import machine

    assert set(emulation.SETTINGS[label]) <= set(machine.SWITCHES)


def test_its_record_is_not_mistaken_for_a_run_report(tmp_path):
    from attention_conformance.run import reports

    (tmp_path / "portability.json").write_text(json.dumps({"machine": {}, "results": []}))
    assert reports.runs(tmp_path) == {}


def test_an_adapter_that_does_not_import_fails_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert emulation.main(adapter="no_such_adapter_module") == 1
    out = capsys.readouterr().out
    assert out.count("RUN FAILED") == 1 and "RUN FAILED as-is" in out, out


def test_without_an_adapter_or_a_tox_folder_it_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert emulation.main() == 2
    assert "use --adapter NAME" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_an_oracle_that_differs_between_caches_is_named(tmp_path):
    from attention_conformance.run import oracle_cache

    a, b = tmp_path / "a", tmp_path / "b"
    oracle_cache._write(a / "oracle" / f"k1{oracle_cache.SUFFIX}", {"context": np.array([1.0, 2.0])})
    oracle_cache._write(b / "oracle" / f"k1{oracle_cache.SUFFIX}", {"context": np.array([1.0, 2.0])})
    assert emulation.oracle_drift(a, b) == (1, [])
    oracle_cache._write(b / "oracle" / f"k1{oracle_cache.SUFFIX}", {"context": np.array([1.0, np.nextafter(2.0, 3.0)])})
    assert emulation.oracle_drift(a, b) == (1, ["k1"])
    # An answer the model has none for (a gradient's bound) is kept as None: alike in both, or named where one has it
    for folder in (a, b):
        oracle_cache._write(folder / "oracle" / f"k2{oracle_cache.SUFFIX}", {"grad": np.ones(2)}, none=["bound"])
    assert emulation.oracle_drift(a, b) == (2, ["k1"])
    oracle_cache._write(b / "oracle" / f"k2{oracle_cache.SUFFIX}", {"grad": np.ones(2), "bound": np.zeros(2)})
    assert emulation.oracle_drift(a, b) == (2, ["k1", "k2"])


def test_tox_passes_every_switch_the_machine_record_names():
    """machine.SWITCHES and tox.ini's pass_env are two lists: a switch tox dropped would make an
    emulated run silently native. TensorFlow alone does not get the oneDNN cap (SUBSTITUTES)."""
    import configparser
    from pathlib import Path

    from attention_conformance import machine

    tox = configparser.ConfigParser()
    tox.read(Path(__file__).resolve().parent.parent.parent / "tox.ini")
    passed = {line.split(":")[-1].strip() for line in tox["testenv"]["pass_env"].splitlines() if line.strip()}
    assert set(machine.SWITCHES) - passed == set()
    assert (
        "!tensorflow: ONEDNN_MAX_CPU_ISA" in tox["testenv"]["pass_env"]
        and "ONEDNN_MAX_CPU_ISA" in emulation.SUBSTITUTES["tensorflow"]
    )


def test_a_column_substitutes_only_the_value_it_cannot_take(monkeypatch):
    """torch-compiled cannot take ATEN_CPU_CAPABILITY=default (Inductor's generated code does not
    compile) but takes avx2; eager torch takes both, and a column keeps its framework's substitutes."""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    no_simd, avx2 = emulation.SETTINGS["no SIMD dispatch"], emulation.SETTINGS["AVX2"]
    assert emulation.environment("torch", no_simd)["ATEN_CPU_CAPABILITY"] == "default"
    assert emulation.environment("torch-compiled", no_simd)["ATEN_CPU_CAPABILITY"] == "avx2"
    assert emulation.environment("torch-compiled", no_simd)["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    assert emulation.environment("torch-compiled", avx2)["ATEN_CPU_CAPABILITY"] == "avx2"
    assert "ONEDNN_MAX_CPU_ISA" not in emulation.environment("tensorflow-compiled", avx2)
    assert set(emulation.substitutes("torch-compiled")) == {"ATEN_CPU_CAPABILITY=default"}


def _ran(monkeypatch, isa, flags=()):
    from attention_conformance import machine

    described = machine.describe() | {"isa": isa, "switches": {}}
    monkeypatch.setattr(machine, "describe", lambda: described)
    monkeypatch.setattr(machine, "cpu_flags", lambda: set(flags))
    ran = []

    def run(name, setting, directory, python, pytest_args):
        ran.append(directory.name)
        return _report({"t": 0.1}, {}), None

    monkeypatch.setattr(emulation, "_run", run)
    return ran


def test_a_setting_this_cpu_already_is_is_not_rerun_and_says_so(monkeypatch):
    ran = _ran(monkeypatch, "AVX2")
    result = emulation.measure("x")
    assert ran == ["as-is", "1_thread", "no_SIMD_dispatch"]
    assert result["native"] == {"AVX2": "this CPU is AVX2: its as-is run is that run"} and not result["changed"]
    assert "  AVX2: not rerun: this CPU is AVX2: its as-is run is that run" in emulation._lines(result)


@pytest.mark.parametrize(
    ("name", "isa", "flags"),
    [
        ("x", "AVX-512", ()),  # the caps are below this CPU
        ("x", "AVX2", ("avx_vnni",)),  # oneDNN's AVX-VNNI kernels sit above the AVX2 cap
        ("tensorflow", "AVX2", ()),  # its stand-in (oneDNN off) is not this CPU as it is
    ],
)
def test_the_avx2_setting_is_rerun_wherever_it_changes_something(monkeypatch, name, isa, flags):
    ran = _ran(monkeypatch, isa, flags)
    assert emulation.measure(name)["native"] == {} and "AVX2" in ran


def test_the_adapters_own_run_stands_for_the_as_is_run_without_running_it(monkeypatch):
    ran = _ran(monkeypatch, "AVX-512")
    own = _report({"t": 0.1}, {})
    result = emulation.measure("x", as_is=own)
    assert "as-is" not in ran and result["seconds"]["as-is"] == "its own run" and result["tests"] == 1
