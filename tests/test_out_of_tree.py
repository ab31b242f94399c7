"""An adapter from outside this repository runs the whole spec; the self-check names what is missing."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(args, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env)


def test_an_adapter_outside_the_repository_runs_the_spec(tmp_path):
    # The float64 reference, copied out as somebody's own module: it imports nothing from the suite.
    shutil.copy(ROOT / "adapters" / "reference.py", tmp_path / "someones_numpy_adapter.py")
    done = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--adapter", "someones_numpy_adapter",
                 "--reports", str(tmp_path / "reports"), "tests/test_conformance.py"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    assert re.search(r"\d+ passed", done.stdout)
    assert (tmp_path / "reports" / "someones_numpy_adapter.json").exists()


def test_the_self_check_names_a_missing_function_in_a_broken_template(tmp_path):
    text = (ROOT / "adapters" / "_template.py").read_text()
    broken = re.sub(r"\ndef softmax\(scores\):\n    raise NotImplementedError\n", "\n", text)
    broken = broken.replace("def blend(weights, v):", "def blend(weights, values):")
    assert broken != text
    (tmp_path / "my_adapter.py").write_text(broken)
    done = _run(["-m", "adapters", "check", "my_adapter"], tmp_path)
    assert done.returncode == 1
    assert "my_adapter: missing function softmax(scores)" in done.stdout
    assert "my_adapter: blend(weights, values) should be blend(weights, v)" in done.stdout


def test_the_template_itself_passes_the_self_check():
    done = subprocess.run([sys.executable, "-m", "adapters", "check", "adapters._template"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
