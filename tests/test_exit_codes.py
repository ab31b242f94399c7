"""The table of exit codes in docs/usage.md is what the commands return: one representative of each row, through the
installed command's entry point (cli.main) or, for `run`, pytest's own process."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from explained import decode_arrays

from attention_conformance import cli, writing
from attention_conformance.cases import loader
from attention_conformance.run import reports
from attention_conformance.tools.explain import per_row

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"


def _table():
    text = USAGE.read_text()
    start = text.index("<!-- exit codes: tests/test_exit_codes.py reads this table -->")
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| (.*)$", text[start:], re.M)}


def test_the_usage_page_lists_every_code_a_command_returns():
    assert sorted(_table()) == [0, 1, 2, 3, 4, 5, per_row.NO_ANSWER, writing.EXIT, cli.INTERRUPTED]


def test_ctrl_c_is_one_line_and_130(monkeypatch, capsys):
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_command", interrupted)
    assert cli.main(["explain", "x.npz"]) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err.startswith("interrupted: ")


def _report(directory, outcome):
    reports.write_run(
        directory,
        "reference",
        version="numpy",
        mode={"name": "eager", "runs": "op by op"},
        dtypes=["float32"],
        devices={"cpu": "ran"},
        spec=loader.load(),
        spec_sha256="0" * 64,
        numerics={},
        complete=True,
        expected=1,
        tests={"test_context[reference-float32-sat]": {"outcome": outcome, "margin": None, "message": "off"}},
    )


def _code(*argv):
    try:
        return cli.main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


def test_summary_codes(tmp_path, capsys):
    _report(tmp_path / "r", "failed")
    assert _code("summary", "--reports", str(tmp_path / "r"), "--out", str(tmp_path / "out")) == 1
    assert _code("summary", "--reports", str(tmp_path / "missing")) == 2
    assert _code("summary", "--reports", str(tmp_path / "r"), "--reports", str(tmp_path / "r")) == 2
    (tmp_path / "r" / "reference.json").write_text("{not json")
    assert _code("summary", "--reports", str(tmp_path / "r")) == 2
    _report(tmp_path / "r", "failed")
    (tmp_path / "a file").write_text("")  # --out under a file: the system refuses the folder
    assert _code("summary", "--reports", str(tmp_path / "r"), "--out", str(tmp_path / "a file" / "out")) == writing.EXIT
    assert "a file/out/matrix.md: cannot write (Not a directory)" in capsys.readouterr().err


def test_fuzz_and_sweep_refuse_a_bad_count_with_2():
    assert _code("fuzz", "--adapter", "reference", "--examples", "0") == 2
    assert _code("sweep", "--adapter", "reference", "--examples", "0") == 2


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["-k", "no_case_is_named_this"], 5),
        (["--spec", "no_such_spec.yaml"], 4),
    ],
)
def test_run_keeps_pytests_codes(tmp_path, args, code):
    done = subprocess.run(
        [sys.executable, "-m", "attention_conformance", "run", "--adapter", "reference", "--reports", "r", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]


def test_explain_without_an_answer_is_its_own_code(tmp_path):
    """A bfloat16 decode over 16,384 keys: an output of zeros would be within, so neither 0 nor 1 (per_row.py)."""
    np.savez(tmp_path / "decode.npz", **decode_arrays(16384))
    assert _code("explain", str(tmp_path / "decode.npz"), "--json", str(tmp_path / "v.json")) == per_row.NO_ANSWER
    assert json.loads((tmp_path / "v.json").read_text())["verdict"] == "no answer"
