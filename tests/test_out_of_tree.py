"""An outsider's view: the installed command, run from a directory that is not this checkout, against
an adapter that lives there too; and the self-check naming what a broken template lacks."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import yaml
from pathlib import Path

from attention_conformance import ADAPTERS_DIR, contract

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
    assert "| document values | sat | ok" in (tmp_path / "reports" / "matrix.md").read_text()


def test_the_self_check_names_a_missing_function_in_a_broken_template(tmp_path):
    text = _run(["template"], tmp_path).stdout
    broken = re.sub(r"\ndef softmax\(scores\):\n    raise NotImplementedError\n", "\n", text)
    broken = broken.replace("def blend(weights, v):", "def blend(weights, values):")
    assert broken != text
    (tmp_path / "my_adapter.py").write_text(broken)
    done = _run(["check", "my_adapter"], tmp_path)
    assert done.returncode == 1
    assert "my_adapter: missing function softmax(scores)" in done.stderr  # problems go to stderr, as every command's do
    assert "my_adapter: blend(weights, values) should be blend(weights, v)" in done.stderr


def test_the_unfilled_template_fails_the_self_check_naming_every_function(tmp_path):
    (tmp_path / "as_copied.py").write_text(_run(["template"], tmp_path).stdout)
    done = _run(["check", "as_copied"], tmp_path)
    assert done.returncode == 1
    named = {line.split(": ", 1)[1].split("(")[0] for line in done.stderr.splitlines()}
    required = set(contract.CONTRACT) - contract.OPTIONAL  # the template shows optional ops as comments
    assert named == required, sorted(required ^ named)
    assert "as_copied: softmax(scores) with row inputs raises NotImplementedError (in float32, on tiny inputs)" in done.stderr


def test_an_adapter_that_raises_stops_the_run_with_a_usage_error_not_an_internal_error(tmp_path):
    (tmp_path / "as_copied.py").write_text(_run(["template"], tmp_path).stdout)
    for args in ([], ["-q"]):
        done = _run(["run", "--adapter", "as_copied", *args], tmp_path)
        assert done.returncode == 4, done.stdout[-1500:] + done.stderr[-1500:]  # never 3 (INTERNALERROR)
        assert "adapter 'as_copied': version() raises NotImplementedError" in done.stderr
        assert "attention-conformance check as_copied" in done.stderr


def test_the_self_check_names_wrong_keys_shapes_and_dtypes(tmp_path):
    (tmp_path / "sloppy.py").write_text(
        (ADAPTERS_DIR / "reference.py").read_text() + "\n\n"
        "def softmax(scores):  # over the wrong axis\n"
        "    return np.exp(scores).sum(axis=0)\n\n\n"
        "def causal_attention(x, w_query, w_key, w_value):\n"
        "    return {'weights': 1.0}\n\n\n"
        "def project(x, w):\n"
        "    return (x @ w).astype(np.float16)\n\n\n"
        "def sgd_step(x, w_query, w_key, w_value, g, lr):\n"
        "    return [w_query, w_key, w_value]\n")
    done = _run(["check", "sloppy"], tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "sloppy: softmax(scores) with row inputs: output 'weights' has shape [], should be [3]" in lines
    assert ("sloppy: causal_attention(x, w_query, w_key, w_value) with unbatched inputs returned ['weights'], should return a "
            "dict with ['context', 'weights']") in lines
    assert ("sloppy: sgd_step(x, w_query, w_key, w_value, g, lr) with unbatched inputs returned list, should return a dict "
            "with ['w_key', 'w_query', 'w_value']") in lines
    assert "sloppy: project(x, w) with row inputs: output 'projection' has dtype float16, should be float64 (the dtype it was given)" in lines


TEXTBOOK_MASK = """

def masked_attention(x, w_query, w_key, w_value, mask):  # the textbook -inf mask: NaN on a row with every key hidden
    queries, keys, values = x @ w_query, x @ w_key, x @ w_value
    scores = np.where(mask, -np.inf, queries @ np.swapaxes(keys, -1, -2) / np.sqrt(keys.shape[-1]))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return {"weights": weights, "context": weights @ values}
"""


def test_an_adapter_declares_its_own_known_divergences_held_to_the_strict_rules(tmp_path):
    base = (ADAPTERS_DIR / "reference.py").read_text() + TEXTBOOK_MASK

    def run(declared, *args):
        (tmp_path / "textbook.py").write_text(base + f"\nKNOWN_DIVERGENCES = {declared!r}\n")
        done = _run(["run", "--adapter", "textbook", "-q", *args], tmp_path)
        return done.returncode, done.stdout + done.stderr

    code, out = run({}, "-k", "padding_fully_masked")
    assert code == 1 and "FAILED attention_conformance/conformance.py::test_weights[textbook-float64-padding_fully_masked]" in out, out[-1500:]
    code, out = run({"padding_fully_masked": "the textbook -inf mask computes 0/0 (https://github.com/pytorch/pytorch/issues/41508)"},
                    "-k", "padding_fully_masked")
    assert code == 0 and "xfailed" in out, out[-1500:]
    assert '"outcome": "diverged"' in (tmp_path / "reports" / "textbook.json").read_text()
    code, out = run({"padding_fully_masked/weights": "narrowed to one output: the context still fails"}, "-k", "padding_fully_masked")
    assert code == 1 and "1 xfailed" in out, out[-1500:]
    code, out = run({"padding_fully_masked": "NaN", "sat/*/float64": "a case that conforms"}, "-k", "sat")
    assert code == 1 and "declared divergence now conforms: remove it from the adapter's KNOWN_DIVERGENCES" in out, out[-1500:]
    code, out = run({"padding_fully_masked": "NaN", "no_such_case": "renamed long ago"})
    assert code == 1 and "known divergences that match no test" in out and "test_*[textbook-*-no_such_case]" in out, out[-1500:]
    code, out = run({"Padding Fully Masked": "not an id"})
    assert code == 4 and "KNOWN_DIVERGENCES must map 'case[/output[/dtype]]'" in out, out[-1500:]


def test_reports_from_two_machines_merge_into_one_matrix(tmp_path):
    """Two frameworks, two report folders (as two machines would write them), one summary."""
    shutil.copy(ADAPTERS_DIR / "reference.py", tmp_path / "second_framework.py")
    for name, folder in (("reference", "machine_a"), ("second_framework", "machine_b")):
        done = _run(["run", "--adapter", name, "--reports", folder, "-q"], tmp_path)
        assert done.returncode == 0, done.stdout[-1500:]
    merged = _run(["summary", "--reports", "machine_a", "--reports", "machine_b", "--adapter", "reference",
                   "--adapter", "second_framework"], tmp_path)
    assert merged.returncode == 0, merged.stdout[-2000:]
    assert not (tmp_path / "machine_a" / "matrix.md").exists(), "a merge writes where --out says (./reports), not into a folder it read"
    header = (tmp_path / "reports" / "matrix.md").read_text().splitlines()[0]
    host = json.loads((tmp_path / "machine_a" / "reference.json").read_text())["host"]
    assert f"reference numpy {np.__version__} cpu@{host} float64" in header
    assert f"second_framework numpy {np.__version__} cpu@{host} float64" in header
    sat = next(line for line in (tmp_path / "reports" / "matrix.md").read_text().splitlines() if line.startswith("| document values | sat |"))
    cells = dict(zip(header.split(" | "), sat.split(" | ")))  # each machine's column filled from its own report
    assert [text for column, text in cells.items() if column.endswith(f"@{host} float64")] == ["ok 0.00", "ok 0.00"], cells
    twice = _run(["summary", "--reports", "machine_a", "--reports", "machine_a"], tmp_path)
    assert twice.returncode == 1 and "two runs for one column" in twice.stderr
    report = tmp_path / "machine_b" / "second_framework.json"
    report.write_text(report.read_text().replace('"spec_sha256": "', '"spec_sha256": "0ther'))
    mixed = _run(["summary", "--reports", "machine_a", "--reports", "machine_b"], tmp_path)
    assert mixed.returncode == 1 and "reports merge only when every machine ran the same spec" in mixed.stderr


def test_the_ci_workflow_runs_every_built_in_adapter_and_merges_them():
    workflow = yaml.safe_load((Path(__file__).resolve().parent.parent / ".github" / "workflows" / "conformance.yml").read_text())
    frameworks = workflow["jobs"]["framework"]["strategy"]["matrix"]["adapter"]
    assert sorted(frameworks) == sorted(contract.NAMES)
    merge = next(step for step in workflow["jobs"]["matrix"]["steps"] if "attention-conformance summary" in step.get("run", ""))
    assert workflow["jobs"]["matrix"]["needs"] == "framework"
    assert sorted(merge["env"]["ADAPTERS"].split()) == sorted(contract.NAMES), "the merge names every built-in adapter"


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
