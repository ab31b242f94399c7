"""An outsider's view: the installed command, run from a directory that is not this checkout, against
an adapter that lives there too; and the self-check naming what a broken template lacks."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import yaml
from spec_samples import few_cases

from attention_conformance.contract import ops, registry
from attention_conformance.tools import template

COMMAND = str(Path(sys.executable).parent / "attention-conformance")  # the console script pip installed
# What the machinery tests assert on: a document value, and a case that states a convention (a matrix cell of its
# own kind) where the textbook mask diverges. The whole spec, ~880 tests, is the first test's and each tox env's.
FEW = ("sat", "padding_fully_masked")


def _run(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as an outsider: the module is found beside them
    return subprocess.run([COMMAND, *args], cwd=tmp_path, capture_output=True, text=True, env=env)


def test_an_adapter_outside_the_repository_runs_the_spec_from_anywhere(tmp_path):
    # The float64 reference, copied out as somebody's own module: it imports only the suite's arithmetic and bounds.
    # The whole spec, as the one end-to-end run from outside: the template flattens the reference's package into that
    # one module.
    (tmp_path / "someones_numpy_adapter.py").write_text(template.text("reference"))
    done = _run(["run", "--adapter", "someones_numpy_adapter", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)
    assert (tmp_path / "reports" / "someones_numpy_adapter.json").exists()
    summary = _run(["summary", "--adapter", "someones_numpy_adapter"], tmp_path)
    assert summary.returncode == 0, summary.stdout[-2000:]
    assert re.search(r"\| someones_numpy_adapter +\| numpy [\d.]+ .*\| conforms", summary.stdout)
    assert "| document values | sat | ok" in (tmp_path / "reports" / "matrix.md").read_text()
    assert "someones_numpy_adapter" in (tmp_path / "reports" / "index.html").read_text()  # the page, beside it


def test_the_self_check_names_a_missing_function_in_a_broken_template(tmp_path):
    text = _run(["template"], tmp_path).stdout
    broken = re.sub(r'\ndef softmax\(scores\):\n(    """.*"""\n)?    raise NotImplementedError\n', "\n", text)
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
    *problems, last = done.stderr.splitlines()
    assert last == f"as_copied: {len(problems)} problem(s), the first lines above"
    named = {line.split(": ", 1)[1].split("(")[0] for line in problems}
    required = set(ops.CONTRACT) - ops.OPTIONAL  # the template shows optional ops as comments
    assert named == required, sorted(required ^ named)
    assert (
        "as_copied: softmax(scores) with row inputs raises NotImplementedError (in float32, on tiny inputs)"
        in done.stderr
    )


def test_an_adapter_that_raises_stops_the_run_with_a_usage_error_not_an_internal_error(tmp_path):
    (tmp_path / "as_copied.py").write_text(_run(["template"], tmp_path).stdout)
    for args in ([], ["-q"]):
        done = _run(["run", "--adapter", "as_copied", *args], tmp_path)
        assert done.returncode == 4, done.stdout[-1500:] + done.stderr[-1500:]  # never 3 (INTERNALERROR)
        assert "adapter 'as_copied': version() raises NotImplementedError" in done.stderr
        assert "attention-conformance check as_copied" in done.stderr


def test_the_self_check_names_wrong_keys_shapes_and_dtypes(tmp_path):
    (tmp_path / "sloppy.py").write_text(
        template.text("reference") + "\n\n"
        "def softmax(scores):  # over the wrong axis\n"
        "    return np.exp(scores).sum(axis=0)\n\n\n"
        "def causal_attention(x, w_query, w_key, w_value):\n"
        "    return {'weights': 1.0}\n\n\n"
        "def project(x, w):\n"
        "    return (x @ w).astype(np.float16)\n\n\n"
        "def sgd_step(x, w_query, w_key, w_value, g, lr):\n"
        "    return [w_query, w_key, w_value]\n"
    )
    done = _run(["check", "sloppy"], tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "sloppy: softmax(scores) with row inputs: output 'weights' has shape [], should be [3]" in lines
    assert (
        "sloppy: causal_attention(x, w_query, w_key, w_value) with unbatched inputs returned ['weights'], "
        "should return a dict with ['context', 'weights']"
    ) in lines
    assert (
        "sloppy: sgd_step(x, w_query, w_key, w_value, g, lr) with unbatched inputs returned list, should return a dict "
        "with ['w_key', 'w_query', 'w_value']"
    ) in lines
    assert (
        "sloppy: project(x, w) with row inputs: output 'projection' has dtype float16, "
        "should be float64 (the dtype it was given)" in lines
    )


TEXTBOOK_MASK = """

def masked_attention(x, w_query, w_key, w_value, mask):  # the textbook -inf mask: NaN on a row with every key hidden
    queries, keys, values = x @ w_query, x @ w_key, x @ w_value
    scores = np.where(mask, -np.inf, queries @ np.swapaxes(keys, -1, -2) / np.sqrt(keys.shape[-1]))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return {"weights": weights, "context": weights @ values}
"""


def test_an_adapter_declares_its_own_known_divergences_held_to_the_strict_rules(tmp_path):
    base = template.text("reference") + TEXTBOOK_MASK
    spec = str(few_cases(tmp_path, *FEW))  # the rules are the point, not the cases: unnarrowed, a complete run still

    def run(declared, *args):
        (tmp_path / "textbook.py").write_text(base + f"\nKNOWN_DIVERGENCES = {declared!r}\n")
        done = _run(["run", "--adapter", "textbook", "--spec", spec, "-q", *args], tmp_path)
        return done.returncode, done.stdout + done.stderr

    code, out = run({}, "-k", "padding_fully_masked")
    assert (
        code == 1
        and "FAILED attention_conformance/conformance.py::test_weights[textbook-float64-padding_fully_masked]" in out
    ), out[-1500:]
    code, out = run(
        {
            "padding_fully_masked": "the textbook -inf mask computes 0/0 (https://github.com/pytorch/pytorch/issues/41508)"
        },
        "-k",
        "padding_fully_masked",
    )
    assert code == 0 and "xfailed" in out, out[-1500:]
    diverged = json.loads((tmp_path / "reports" / "textbook.json").read_text())["tests"][
        "test_weights[textbook-float64-padding_fully_masked]"
    ]
    assert (
        diverged["outcome"] == "diverged" and "issues/41508" in diverged["reason"] and "got nan" in diverged["message"]
    ), diverged
    code, out = run(
        {"padding_fully_masked/weights": "narrowed to one output: the context still fails"},
        "-k",
        "padding_fully_masked",
    )
    assert code == 1 and "1 xfailed" in out, out[-1500:]
    code, out = run({"padding_fully_masked": "NaN", "sat/*/float64": "a case that conforms"}, "-k", "sat")
    stale_entry = (
        "declared divergence now conforms: remove it from the adapter's KNOWN_DIVERGENCES, entry 'sat/*/float64'"
    )
    assert code == 1 and stale_entry in out, out[-1500:]
    stale = json.loads((tmp_path / "reports" / "textbook.json").read_text())["tests"][
        "test_scores[textbook-float64-sat]"
    ]
    assert stale["outcome"] == "stale divergence" and stale["message"].startswith("declared divergence now conforms"), (
        stale
    )
    code, out = run(
        {
            "padding_fully_masked": "NaN",
            "no_such_case": "renamed long ago",
            "fuzz_softmax/weights": "fuzz's generated cases alone: no spec test to match",
            "fuzz_no_such_op": "a typo",
        }
    )
    stale = next(line for line in out.splitlines() if "known divergences that match no test" in line)
    assert code == 1 and "test_*[textbook-*-no_such_case]" in stale and "fuzz_no_such_op" in stale, out[-1500:]
    assert "fuzz_softmax" not in stale, stale
    code, out = run({"Padding Fully Masked": "not an id"})
    assert code == 4 and "KNOWN_DIVERGENCES must map 'case[/output[/dtype]]'" in out, out[-1500:]


def test_reports_from_two_machines_merge_into_one_matrix(tmp_path):
    """Two frameworks, two report folders (as two machines would write them), one summary."""
    (tmp_path / "second_framework.py").write_text(template.text("reference"))
    spec = str(few_cases(tmp_path, *FEW))  # one file for both: reports merge only from the same spec
    for name, folder in (("reference", "machine_a"), ("second_framework", "machine_b")):
        done = _run(["run", "--adapter", name, "--reports", folder, "--spec", spec, "-q"], tmp_path)
        assert done.returncode == 0, done.stdout[-1500:]
    # What the folders hold, and nothing else: no built-in adapter that was never asked for shows as MISSING.
    merged = _run(["summary", "--reports", "machine_a", "--reports", "machine_b"], tmp_path)
    assert merged.returncode == 0, merged.stdout[-2000:] + merged.stderr[-2000:]
    assert [
        line for line in merged.stdout.splitlines() if line.startswith("|") and "MISSING" in line
    ] == [] and merged.stderr == ""
    assert merged.stdout.strip().splitlines()[-1].startswith("conforms: reference numpy"), merged.stdout[-300:]
    assert (
        "Conformance matrix (reports/matrix.md, reports/matrix.json, " in merged.stdout
    )  # and what it says of the PNG is true:
    assert ("reports/matrix.png," in merged.stdout) == (tmp_path / "reports" / "matrix.png").exists()
    assert not (tmp_path / "machine_a" / "matrix.md").exists(), (
        "a merge writes where --out says (./reports), not into a folder it read"
    )
    header = (tmp_path / "reports" / "matrix.md").read_text().splitlines()[0]
    host = json.loads((tmp_path / "machine_a" / "reference.json").read_text())["host"]
    assert f"reference numpy {np.__version__} cpu@{host} float64" in header
    assert f"second_framework numpy {np.__version__} cpu@{host} float64" in header
    sat = next(
        line
        for line in (tmp_path / "reports" / "matrix.md").read_text().splitlines()
        if line.startswith("| document values | sat |")
    )
    cells = dict(
        zip(header.strip("| ").split(" | "), sat.strip("| ").split(" | "))
    )  # each machine's column filled from its own report
    assert [text for column, text in cells.items() if column.endswith(f"@{host} float64")] == ["ok 0.00", "ok 0.00"], (
        cells
    )
    asked = _run(
        ["summary", "--reports", "machine_a", "--reports", "machine_b", "--adapter", "torch", "--out", "elsewhere"],
        tmp_path,
    )
    assert asked.returncode == 1 and (tmp_path / "elsewhere" / "matrix.md").exists()
    assert (tmp_path / "elsewhere" / "index.html").exists()
    (tmp_path / "a_folder").mkdir()
    for given, written in (("a_folder", "a_folder/index.html"), ("new/", "new/index.html"), ("page.html", "page.html")):
        done = _run(["summary", "--reports", "machine_a", "--html", given], tmp_path)
        assert done.returncode == 0 and f"{written})" in done.stdout and (tmp_path / written).is_file(), done.stderr
    unwritable = _run(["summary", "--reports", "machine_a", "--html", "/proc/page.html"], tmp_path)
    assert unwritable.returncode == 74, unwritable.stderr  # the machine refused a file (docs/usage.md: exit codes)
    assert unwritable.stderr.strip().splitlines()[-1].startswith("error: /proc/page.html: cannot write ("), (
        unwritable.stderr
    )
    assert "Traceback" not in unwritable.stderr
    (tmp_path / "taken" / "index.html" / "something").mkdir(parents=True)  # the page's name is a folder: replace fails
    taken = _run(["summary", "--reports", "machine_a", "--html", "taken"], tmp_path)
    assert taken.returncode == 74 and "error: taken/index.html: cannot write (" in taken.stderr, taken.stderr
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["index.html"], "nothing half-written left"
    empty = _run(["summary", "--reports", "machine_a", "--html", ""], tmp_path)
    assert empty.returncode == 2 and "--html needs a path" in empty.stderr
    assert asked.stderr.strip().splitlines()[-1].startswith("FAILED: torch: MISSING: no report"), asked.stderr
    from attention_conformance.run import reports

    reports.hold(tmp_path / "machine_c", ["crashed_adapter"])  # what a run that died mid-way leaves behind
    unfinished = _run(["summary", "--reports", "machine_a", "--reports", "machine_c"], tmp_path)
    assert unfinished.returncode == 1
    assert unfinished.stderr.strip().splitlines()[-1].startswith("FAILED: crashed_adapter: MISSING: started "), (
        unfinished.stderr
    )
    assert "never finished" in unfinished.stderr
    reports.hold(tmp_path / "machine_e", ["reference"])  # unfinished here, finished in machine_a: still a failure
    both = _run(["summary", "--reports", "machine_a", "--reports", "machine_e"], tmp_path)
    assert both.returncode == 1 and "FAILED: reference: MISSING: started " in both.stderr, both.stderr
    only = _run(
        ["summary", "--reports", "machine_b", "--reports", "machine_c", "--adapter", "second_framework"], tmp_path
    )
    assert only.returncode == 0, only.stderr  # --adapter narrows unfinished runs too
    died = _run(["run", "--adapter", "no_such_framework_adapter", "--reports", "machine_d", "-q"], tmp_path)
    assert died.returncode == 4 and not (tmp_path / "machine_d" / "no_such_framework_adapter.json").exists()
    twice = _run(["summary", "--reports", "machine_a", "--reports", "machine_a"], tmp_path)
    assert twice.returncode == 2 and "the same --reports folder is given twice" in twice.stderr
    shutil.copytree(tmp_path / "machine_a", tmp_path / "machine_a_again")
    same_column = _run(["summary", "--reports", "machine_a", "--reports", "machine_a_again"], tmp_path)
    assert same_column.returncode == 2 and "two runs for one column" in same_column.stderr  # the folders given clash
    report = tmp_path / "machine_b" / "second_framework.json"
    report.write_text(report.read_text().replace('"spec_sha256": "', '"spec_sha256": "0ther'))
    mixed = _run(["summary", "--reports", "machine_a", "--reports", "machine_b"], tmp_path)
    assert mixed.returncode == 2 and "reports merge only when every machine ran the same spec" in mixed.stderr


def test_the_ci_workflow_runs_every_built_in_adapter_and_merges_them():
    workflow = yaml.safe_load(
        (Path(__file__).resolve().parent.parent / ".github" / "workflows" / "conformance.yml").read_text()
    )
    frameworks = workflow["jobs"]["framework"]["strategy"]["matrix"]["adapter"]
    assert sorted(frameworks) == sorted(registry.NAMES)
    merge = next(
        step for step in workflow["jobs"]["matrix"]["steps"] if "attention-conformance summary" in step.get("run", "")
    )
    assert workflow["jobs"]["matrix"]["needs"] == "framework"
    assert sorted(merge["env"]["ADAPTERS"].split()) == sorted(registry.NAMES), "the merge names every built-in adapter"
    out = merge["run"].split("--out ")[1].split()[0]
    uploaded = [
        step["with"]["path"]
        for step in workflow["jobs"]["matrix"]["steps"]
        if "upload-artifact" in step.get("uses", "")
    ]
    assert any(f"{out}/index.html" in path.split() for path in uploaded), "the merged page is uploaded"


def test_the_wheel_carries_the_data_and_no_generic_top_level_name(tmp_path):
    # A copy of the sources: setuptools builds in place, and a stale build/ folder would leak into the wheel.
    source = tmp_path / "source"
    shutil.copytree(
        Path(__file__).resolve().parent.parent,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".tox",
            ".venv",
            ".ci-venv",
            "build",
            "*.egg-info",
            "node_modules",
            "reports",
            ".hypothesis",
            "__pycache__",
        ),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("attention_conformance-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"attention_conformance", wheel.name.split("-py3")[0] + ".dist-info"}
    for needed in (
        "spec/attention.yaml",
        "spec/divergences/torch.yaml",
        "spec/documents/000_607594879886645b.txt",
        "golden/MANIFEST.json",
        "golden/doc000_seed123.json",
        "adapters/torch/__init__.py",
        "adapters/torch/layers.py",
        "adapters/_template.py",
        "adapters/tfjs_node/server.js",
        "conformance.py",
        "plugin.py",
        "publish/page.html",
        "spec/divergences/README.md",
        "docs/divergences.md",  # `attention-conformance docs divergences`: the known divergences' format and kinds
        "docs/contract.md",  # `attention-conformance docs contract`: a pip user has no checkout to read it in
    ):
        assert f"attention_conformance/{needed}" in names, needed
    # Installed from the wheel (not editable), run from elsewhere: the path an outsider takes.
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True
    )
    scratch = tmp_path / "elsewhere"
    scratch.mkdir()
    code = (
        f"import sys; sys.argv = ['attention-conformance', 'run', '--adapter', 'reference', '-q', '-k', 'sat']; "
        f"import attention_conformance; assert attention_conformance.__file__.startswith({str(site)!r}); "
        f"from attention_conformance.cli import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=scratch,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout) and (scratch / "reports" / "reference.json").exists()


# A backslash at a line's end continues the line: the adapter's text is unchanged, this file's lines fit in 120.
GPT2_ONLY = """
from attention_conformance.adapters import reference
from attention_conformance.adapters.reference import *  # noqa: F403 - the oracle's ops, but one layer

DTYPES = reference.DTYPES
NOT_APPLICABLE = {**reference.NOT_APPLICABLE, "attention_module/weights": "the SDPA path returns no attention weights",
                  "layer=mha": "GPT-2's layer only", "layer=mha_averaged": "GPT-2's layer only", \
"layer=mha_seq_first": "GPT-2's layer only"}


def attention_module(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, \
checkpoint):
    if layer != "gpt2":
        raise ValueError(f"only GPT-2's layer, not {layer!r}")
    out = reference.attention_module(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, \
causal, layer,
                                     checkpoint)
    return {"context": out["context"], "round_trip": out["round_trip"]}
"""


def test_an_adapter_declares_one_output_or_one_parameter_value_not_applicable(tmp_path):
    """A GPT-2-only layer behind an SDPA path: no weights, no "mha" layer; the rest of its cases run."""
    (tmp_path / "gpt2_only.py").write_text(GPT2_ONLY)
    check = _run(["check", "gpt2_only"], tmp_path)
    assert check.returncode == 0, check.stderr[-2000:]
    done = _run(["run", "--adapter", "gpt2_only", "-q", "-k", "layer_ and not layer_defaults"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tests = json.loads((tmp_path / "reports" / "gpt2_only.json").read_text())["tests"]
    assert tests["test_context[gpt2_only-float64-layer_gpt2_small]"]["outcome"] == "passed"
    assert tests["test_context[gpt2_only-float64-layer_gpt2_port_from_keras]"]["outcome"] == "passed"
    assert tests["test_context[gpt2_only-float64-layer_gpt2_gpt2_small_heads_causal]"]["outcome"] == "passed"
    weights = tests["test_weights[gpt2_only-float64-layer_gpt2_small]"]
    assert weights.pop("seconds") >= 0  # the test's cost, for the family costs
    assert weights == {
        "outcome": "not applicable",
        "margin": None,
        "ulp": None,
        "worst": None,
        "message": None,
        "reason": "the SDPA path returns no attention weights",
        "declared": None,
    }, weights
    assert tests["test_context[gpt2_only-float64-layer_port_from_keras]"]["reason"] == "GPT-2's layer only"
    # A key that names nothing is refused, as a known divergence's is.
    (tmp_path / "typo.py").write_text(GPT2_ONLY.replace('"attention_module/weights"', '"attention_module/wieghts"'))
    typo = _run(["check", "typo"], tmp_path)
    assert (
        typo.returncode == 1
        and "NOT_APPLICABLE key 'attention_module/wieghts': attention_module() has no output 'wieghts'" in typo.stderr
    )
    (tmp_path / "renamed.py").write_text(GPT2_ONLY.replace('"layer=mha"', '"layer_mha_tiny"'))
    renamed = _run(["run", "--adapter", "renamed", "-q"], tmp_path)
    assert (
        renamed.returncode == 4 and "NOT_APPLICABLE key(s) 'layer_mha_tiny' name no dtype, op, case" in renamed.stderr
    )


def test_test_ids_read_the_same_installed_or_in_a_checkout_and_are_accepted_back(tmp_path):
    (tmp_path / "textbook.py").write_text(template.text("reference") + TEXTBOOK_MASK)
    done = _run(
        ["run", "--adapter", "textbook", "-rfs", "--junitxml", "junit.xml", "-k", "padding_fully_masked"], tmp_path
    )
    node = "attention_conformance/conformance.py::test_weights[textbook-float64-padding_fully_masked]"
    assert done.returncode == 1 and f"FAILED {node}" in done.stdout, done.stdout[-2000:]
    assert (
        "SKIPPED [1] attention_conformance/conformance.py::test_weights[textbook-float16-padding_fully_masked]: "
        "not applicable: " in done.stdout
    ), done.stdout[-2000:]
    junit = (tmp_path / "junit.xml").read_text()
    assert (
        'classname="attention_conformance.conformance" name="test_weights[textbook-float64-padding_fully_masked]"'
        in junit
    )
    report = (tmp_path / "reports" / "textbook.json").read_text()
    again = _run(["run", "--adapter", "textbook", "-q", node], tmp_path)  # the id as printed runs that test
    assert again.returncode == 1 and "1 failed" in again.stdout and "passed" not in again.stdout, again.stdout[-1000:]
    bare = _run(["run", "--adapter", "textbook", "-q", node.split("::")[1]], tmp_path)  # as the report keys it
    assert bare.returncode == 1 and "1 failed" in bare.stdout, bare.stdout[-1000:] + bare.stderr[-1000:]
    assert "narrowed by pytest arguments, so marked incomplete" in bare.stdout
    (tmp_path / "reports" / "textbook.json").write_text(report)
    wrong = _run(["run", "--adapter", "textbook", "-q", node.replace("textbook-", "torch-")], tmp_path)
    assert wrong.returncode == 4 and (tmp_path / "reports" / "textbook.json").read_text() == report, (
        "a usage error before any test ran leaves the last report as it was"
    )


def test_collecting_writes_no_report_and_succeeds(tmp_path):
    (tmp_path / "mine.py").write_text(template.text("reference"))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "mine.json").write_text("the last run's report")
    done = _run(["run", "--adapter", "mine", "--collect-only", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
    assert re.search(r"\d+ tests collected", done.stdout)
    assert (tmp_path / "reports" / "mine.json").read_text() == "the last run's report"


def test_a_copy_of_a_built_in_adapter_takes_over_its_known_divergences(tmp_path):
    # A built-in adapter's source as one file (adapters/torch/ is a package), as an installed user gets it.
    source = _run(["template", "torch"], tmp_path).stdout
    assert source == template.text("torch")
    (tmp_path / "my_torch.py").write_text(source)
    cases = "padding_fully_masked or mask_additive_large"
    bare = _run(["run", "--adapter", "my_torch", "-q", "-k", cases], tmp_path)
    assert bare.returncode == 1, bare.stdout[-1500:]
    # A divergence that raises is a result like any other, with the case named.
    assert (
        "my_torch float16, case 'mask_additive_large': mask_conventions() raised RuntimeError: "
        "value cannot be converted" in bare.stdout
    )
    (tmp_path / "my_torch.py").write_text(
        source + "\nfrom attention_conformance import known_divergences\n"
        "KNOWN_DIVERGENCES = known_divergences('torch')\n"
    )
    taken = _run(["run", "--adapter", "my_torch", "-q", "-k", cases], tmp_path)
    assert taken.returncode == 0 and "xfailed" not in taken.stdout, taken.stdout[-1500:]
    tests = json.loads((tmp_path / "reports" / "my_torch.json").read_text())["tests"]
    raised = tests["test_context[my_torch-float16-mask_additive_large]"]
    # Its NaN row is judged on the side the copy's convention names, not excused.
    nan_row = tests["test_weights[my_torch-float32-padding_fully_masked]"]
    assert nan_row["outcome"] == "passed" and nan_row["declared"]["side"] == "fully_masked_rows=nan", nan_row
    # The copy keeps each entry's kind: the refusal is checked (its exception and message), not excused.
    assert raised["outcome"] == "passed" and raised["declared"]["kind"] == "raises", raised
    assert raised["declared"]["raised"].startswith("RuntimeError: value cannot be converted"), raised


def test_command_problems_are_one_line_on_stderr(tmp_path):
    done = _run(["validate", "--golden-dir", "/nonexistent"], tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr == "error: /nonexistent: no such golden directory (it holds MANIFEST.json and the golden files)\n"
    )


def test_the_self_check_calls_each_op_in_every_declared_dtype(tmp_path):
    source = template.text("reference")
    source = source.replace('DTYPES = ("float64",)', 'DTYPES = ("float64", "float16")')
    source = source.replace('    "float16": "the oracle computes in float64 only",\n', "")
    source = source.replace(
        "def blend(weights, v):\n",
        "def blend(weights, v):\n    if np.asarray(weights).dtype == np.float16:\n"
        "        raise TypeError('no float16 kernel')\n",
    )
    (tmp_path / "second_dtype_breaks.py").write_text(source)
    done = _run(["check", "second_dtype_breaks"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "blend(weights, v) raises TypeError: no float16 kernel (in float16, on tiny inputs)" in done.stderr, (
        done.stderr
    )


FLOAT32_INSIDE = """
import numpy as np

DTYPES = ("float64",)
NOT_APPLICABLE = {"*": "not written yet"}
SCALE = 1.0
KNOWN_DIVERGENCES = {
    "float64_in_float32": {
        "kind": "precision",
        "computed_in": "float32",
        "reason": "computed in float32 inside, as our kernel does",
        "tests": ["*/*/float64"],
    },
}


def version():
    return "float32 inside 0.1"


def attention(x, w_query, w_key, w_value):
    x, w_query, w_key, w_value = (np.asarray(a, dtype=np.float32) for a in (x, w_query, w_key, w_value))
    q, k, v = x @ w_query, x @ w_key, x @ w_value
    scores = q @ k.swapaxes(-1, -2)
    scaled = scores / np.float32(k.shape[-1] ** 0.5)
    e = np.exp(scaled - scaled.max(-1, keepdims=True))
    weights = e / e.sum(-1, keepdims=True)
    out = {"query": q, "key": k, "value": v, "scores": scores, "weights": weights, "context": weights @ v * SCALE}
    return {**{n: a.astype(np.float64) for n, a in out.items()}, "d_k": k.shape[-1]}
"""


def test_an_adapters_own_precision_is_judged_at_float32_and_catches_a_one_percent_error(tmp_path):
    """An outside trial: a dict in KNOWN_DIVERGENCES was refused by the contract check, and a precision that a failing
    test carried crashed the run's end (KeyError 'needed'), hiding every failure's message."""
    (tmp_path / "inside.py").write_text(FLOAT32_INSIDE)
    assert _run(["check", "inside"], tmp_path).returncode == 0
    done = _run(["run", "--adapter", "inside", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tests = json.loads((tmp_path / "reports" / "inside.json").read_text())["tests"]
    judged = [r["declared"] for r in tests.values() if (r.get("declared") or {}).get("needed")]
    assert judged and all(d["judged_at"] == "float32 accuracy" for d in judged), tests
    (tmp_path / "inside.py").write_text(FLOAT32_INSIDE.replace("SCALE = 1.0", "SCALE = 1.01"))
    wrong = _run(["run", "--adapter", "inside"], tmp_path)
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr, wrong.stderr[-2000:]
    assert "at float32 accuracy as 'float64_in_float32' declares" in wrong.stdout, wrong.stdout[-3000:]
    # Computed in float64 after all: the declaration no longer holds (the trial's rerun saw it pass, its 410 tests not
    # applicable counted as needing it).
    exact = FLOAT32_INSIDE.replace("dtype=np.float32", "dtype=np.float64").replace("np.float32(", "np.float64(")
    (tmp_path / "inside.py").write_text(exact)
    stale = _run(["run", "--adapter", "inside", "-q"], tmp_path)
    assert stale.returncode == 1 and "declared precisions that no test needed" in stale.stdout, stale.stdout[-2000:]
    (tmp_path / "inside.py").write_text(FLOAT32_INSIDE.replace('"computed_in": "float32"', '"computed_inn": "float32"'))
    bad = _run(["run", "--adapter", "inside", "-q"], tmp_path)
    assert bad.returncode == 4 and "INTERNALERROR" not in bad.stdout + bad.stderr, bad.stdout[-2000:] + bad.stderr
    assert "entry 'float64_in_float32': field 'computed_inn': not a field of a precision entry" in bad.stderr
