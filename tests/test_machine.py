"""Where a figure was measured (attention_conformance/machine.py): the record every report carries, read on
this machine without a crash, its widest instruction set and native half types read from the CPU's flags, and
the one line a table shows."""

import json

from attention_conformance import machine


def test_this_machine_is_described_in_a_record_a_report_can_hold(monkeypatch):
    for name in machine.SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    record = machine.describe()
    assert set(record) == {"host", "cpu", "isa", "half", "threads", "switches"}
    assert isinstance(record["cpu"], str) and isinstance(record["isa"], str) and isinstance(record["half"], list)
    assert isinstance(record["threads"], int) and record["threads"] >= 1
    assert record["switches"] == {"OPENBLAS_NUM_THREADS": "1"}  # only the switches set, with their values
    assert json.loads(json.dumps(record)) == record
    line = machine.one_line()
    assert "\n" not in line and line.endswith(", OPENBLAS_NUM_THREADS=1")


def test_the_widest_instruction_set_and_every_native_half_type_are_read_from_the_flags(monkeypatch):
    monkeypatch.setattr(
        machine, "_cpuinfo", lambda: {"model name": "Test CPU", "flags": "fpu sse4_2 avx avx2 avx512_bf16 f16c"}
    )
    record = machine.describe()
    assert (record["cpu"], record["isa"], record["half"]) == ("Test CPU", "AVX2", ["AVX512-BF16"])
    # An ARM CPU states its flags as Features.
    monkeypatch.setattr(machine, "_cpuinfo", lambda: {"Features": "fp asimd fphp asimdhp bf16"})
    record = machine.describe()
    assert (record["isa"], record["half"]) == ("NEON", ["FP16", "BF16"])


def test_no_cpuinfo_is_no_crash(monkeypatch):
    monkeypatch.setattr(machine, "_cpuinfo", lambda: {})
    record = machine.describe()
    assert record["half"] == [] and isinstance(record["isa"], str) and isinstance(record["cpu"], str)


def test_one_line_reads_the_record_it_is_given():
    record = {"cpu": "Xeon", "isa": "AVX-512", "half": [], "threads": 2, "switches": {}}
    assert machine.one_line(record) == "Xeon, AVX-512 (no native half precision), 2 threads"
    record |= {"half": ["AMX-BF16", "AVX512-FP16"], "switches": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "4"}}
    assert machine.one_line(record) == (
        "Xeon, AVX-512 (native AMX-BF16, AVX512-FP16), 2 threads, ATEN_CPU_CAPABILITY=avx2, OMP_NUM_THREADS=4"
    )
