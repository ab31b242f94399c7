"""An outsider's view: the installed command, run from a directory that is not this checkout, against
an adapter that lives there too; and the self-check naming what a broken template lacks."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from attention_conformance import ADAPTERS_DIR

COMMAND = str(Path(sys.executable).parent / "attention-conformance")  # the console script pip installed


def _run(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as an outsider: the module is found beside them
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


def test_the_wheel_carries_the_data_and_no_generic_top_level_name(tmp_path):
    # A copy of the sources: setuptools builds in place, and a stale build/ folder would leak into the wheel.
    source = tmp_path / "source"
    shutil.copytree(Path(__file__).resolve().parent.parent, source, ignore=shutil.ignore_patterns(
        ".git", ".tox", ".venv", ".ci-venv", "build", "*.egg-info", "node_modules", "reports", ".hypothesis", "__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("attention_conformance-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"attention_conformance", wheel.name.split("-py3")[0] + ".dist-info"}
    for needed in ("spec/attention.yaml", "spec/known_divergences.yaml", "spec/documents/000_607594879886645b.txt",
                   "golden/MANIFEST.json", "golden/doc000_seed123.json", "adapters/torch.py", "adapters/_template.py",
                   "adapters/tfjs_node/server.js", "conformance.py", "plugin.py"):
        assert f"attention_conformance/{needed}" in names, needed
    # Installed from the wheel (not editable), run from elsewhere: the path an outsider takes.
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True)
    scratch = tmp_path / "elsewhere"
    scratch.mkdir()
    code = f"import sys; sys.argv = ['attention-conformance', 'run', '--adapter', 'reference', '-q', '-k', 'sat']; " \
           f"import attention_conformance; assert attention_conformance.__file__.startswith({str(site)!r}); " \
           f"from attention_conformance.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", code], cwd=scratch, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout) and (scratch / "reports" / "reference.json").exists()
