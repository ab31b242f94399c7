"""What a misbehaving machine leaves: each fault on a real file system (a read-only tmpfs, a 64 KiB one filled
to its last 4 KiB) under the installed command. Each gets one line that names the path and what to do, exit 74,
no traceback, nothing half-written, and the last complete file where it was. docs/testing.md's fault table is
this file's; tests/test_writing.py and tests/run/test_reports.py inject the same faults where no file
system can be made."""

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from attention_conformance import writing
from attention_conformance.cases import loader
from attention_conformance.run import reports

COMMAND = [sys.executable, "-m", "attention_conformance"]
NARROW = ["-k", "cat_sat_hand_check"]  # a few tests: the machinery, not the numbers, is under test


@contextlib.contextmanager
def _mounted(path, *options, fill=None):
    """A tmpfs at `path` (64 KiB), filled by `fill(path)`, then remounted with `options`."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a file system of its own needs root; tests/test_writing.py injects these faults instead")
    path.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True)
    if made.returncode:
        pytest.skip(f"mount refused ({made.stderr.decode().strip()}); tests/test_writing.py injects these faults")
    try:
        if fill:
            fill(path)
        if options:
            subprocess.run(["mount", "-o", ",".join(("remount", *options)), str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _complete_report(directory):
    reports.write_run(
        directory,
        "reference",
        version="numpy",
        mode={"name": "eager", "runs": "op by op"},
        dtypes=["float64"],
        devices={"cpu": "ran"},
        spec=loader.load(),
        spec_sha256="0" * 64,
        numerics={},
        complete=True,
        expected=1,
        tests={},
    )


def _fill_to_4k(path):
    _complete_report(path)
    free = shutil.disk_usage(path).free
    (path / "filler").write_bytes(b"\0" * (free - 4096))


def _files(path):
    return {p.name: p.read_bytes() for p in path.iterdir()}


def _run(*args, cwd):
    done = subprocess.run([*COMMAND, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    return done.returncode, done.stdout + done.stderr


def _one_line(output, path, said):
    lines = [line for line in output.splitlines() if str(path) in line and said in line]
    assert len(lines) == 1, output[-3000:]
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    return lines[0]


def test_run_into_a_read_only_reports_folder(tmp_path):
    with _mounted(tmp_path / "ro", "ro", fill=_complete_report) as folder:
        before = _files(folder)
        code, output = _run("run", "--adapter", "reference", "--reports", str(folder), *NARROW, cwd=tmp_path)
        assert code == writing.EXIT
        assert "--reports" in _one_line(output, folder / "reference.json", "Read-only file system")
        assert _files(folder) == before


def test_run_into_a_full_reports_folder_keeps_the_last_complete_report(tmp_path):
    with _mounted(tmp_path / "full", fill=_fill_to_4k) as folder:
        before = _files(folder)
        code, output = _run("run", "--adapter", "reference", "--reports", str(folder), *NARROW, cwd=tmp_path)
        assert code == writing.EXIT
        assert "free space" in _one_line(output, folder / "reference.json", "No space left on device")
        assert _files(folder) == before  # the marker went, the last report came back, nothing beside it


def test_summary_out_and_html_into_a_read_only_folder(tmp_path):
    _complete_report(tmp_path / "reports")
    with _mounted(tmp_path / "ro", "ro") as folder:
        code, output = _run("summary", "--reports", "reports", "--out", str(folder), cwd=tmp_path)
        assert code == writing.EXIT and "--out" in _one_line(output, folder, "Read-only file system")
        code, output = _run("summary", "--reports", "reports", "--html", str(folder / "page.html"), cwd=tmp_path)
        assert code == writing.EXIT
        assert "--html" in _one_line(output, folder / "page.html", "Read-only file system")
        assert _files(folder) == {}


def test_publish_in_a_read_only_checkout(tmp_path):
    from attention_conformance.publish import tables

    def checkout(path):
        for name, (file, begin, end) in tables.BLOCKS.items():
            (path / file).parent.mkdir(parents=True, exist_ok=True)
            with open(path / file, "a") as handle:
                handle.write(f"{begin}\nold {name}\n{end}\n")

    with _mounted(tmp_path / "ro", "ro", fill=checkout) as root:
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        code, output = _run("publish", cwd=root)
        assert code == writing.EXIT and _one_line(output, "docs/contract.md", "Read-only file system")
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_fuzz_finding_into_a_read_only_folder(tmp_path, monkeypatch):
    pytest.importorskip("hypothesis", reason="fuzz needs hypothesis (the suite env has it)")
    from attention_conformance.tools.fuzz import findings, search

    (tmp_path / "fault_wrong_axis.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            DTYPES = ("float32",)


            def softmax(scores):
                s = np.asarray(scores, dtype=np.float64)
                e = np.exp(s - s.max(axis=0, keepdims=True))  # the wrong axis
                return (e / e.sum(axis=0, keepdims=True)).astype(np.float32)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import fault_wrong_axis

    fuzzer = search.Fuzzer("fault_wrong_axis", fault_wrong_axis, "float32", ["softmax"])
    finding = fuzzer.run(40, seed=0)
    with _mounted(tmp_path / "ro", "ro") as folder:
        with pytest.raises(writing.Refused, match=r"/ro/fault_wrong_axis-softmax-float32\.yaml: cannot write \(Read-"):
            findings.write(fuzzer, finding, folder, "fault_wrong_axis", 0)
        assert _files(folder) == {}


def test_a_read_only_cache_costs_time_never_the_verdict(tmp_path):
    with _mounted(tmp_path / "cache", "ro") as cache:
        done = subprocess.run(
            [
                *COMMAND,
                "run",
                "--adapter",
                "reference",
                "--reports",
                str(tmp_path / "reports"),
                "-k",
                "causal_cat_sat_mat",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=os.environ | {"ATTENTION_CONFORMANCE_CACHE": str(cache)},
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert " passed" in done.stdout and _files(cache) == {}
        said = [line for line in done.stdout.splitlines() if line.startswith(f"cache: {cache} cannot be written")]
        assert len(said) == 1 and "Read-only file system" in said[0] and "ATTENTION_CONFORMANCE_CACHE" in said[0]
