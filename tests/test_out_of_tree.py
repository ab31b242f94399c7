"""An outsider's view: the installed command, run from a directory that is not this checkout, against
an adapter that lives there too; and the self-check naming what a broken template lacks."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from attention_conformance import ADAPTERS_DIR

COMMAND = str(Path(sys.executable).parent / "attention-conformance")  # the console script pip installed


def _run(args, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([COMMAND, *args], cwd=tmp_path, capture_output=True, text=True, env=env)


def test_an_adapter_outside_the_repository_runs_the_spec_from_anywhere(tmp_path):
    # The float64 reference, copied out as somebody's own module: it imports nothing from the suite.
    shutil.copy(ADAPTERS_DIR / "reference.py", tmp_path / "someones_numpy_adapter.py")
    done = _run(["run", "--adapter", "someones_numpy_adapter", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)
    assert (tmp_path / "reports" / "someones_numpy_adapter.json").exists()
    summary = _run(["summary", "--adapter", "someones_numpy_adapter"], tmp_path)
    assert summary.returncode == 0, summary.stdout[-2000:]
    assert re.search(r"\| someones_numpy_adapter +\| numpy [\d.]+ .*\| conforms", summary.stdout)
    assert (tmp_path / "reports" / "matrix.md").exists()


def test_the_self_check_names_a_missing_function_in_a_broken_template(tmp_path):
    text = _run(["template"], tmp_path).stdout
    broken = re.sub(r"\ndef softmax\(scores\):\n    raise NotImplementedError\n", "\n", text)
    broken = broken.replace("def blend(weights, v):", "def blend(weights, values):")
    assert broken != text
    (tmp_path / "my_adapter.py").write_text(broken)
    done = _run(["check", "my_adapter"], tmp_path)
    assert done.returncode == 1
    assert "my_adapter: missing function softmax(scores)" in done.stdout
    assert "my_adapter: blend(weights, values) should be blend(weights, v)" in done.stdout


def test_the_template_itself_passes_the_self_check(tmp_path):
    done = _run(["check", "attention_conformance.adapters._template"], tmp_path)
    assert done.returncode == 0, done.stdout
