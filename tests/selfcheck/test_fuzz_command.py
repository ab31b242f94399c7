"""Fuzzing proves itself, in each framework's environment: the adapter passes its fuzz budget, and the
wrong adapters of tests/mutants whose mistake is in a forward op the fuzzer covers are found within
it (at least 90% of them), each finding a spec case that loads and a reproducer that runs alone."""

import ast
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

from fuzz_kill_table import forward_mutants, fuzzed

from attention_conformance import cli
from attention_conformance.cases import loader
from attention_conformance.contract import registry
from attention_conformance.tools.fuzz import cases

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = 0
# The budget, per adapter run: cases per op in its first dtype, then in each other dtype it declares. Sized
# to keep each <adapter>-selfcheck environment's fuzz part near a minute on a 2-core machine
# (docs/fuzz.md has the measured times); a user's run draws cases.EXAMPLES_PER_OP.
BUDGET = {"first": 3, "other": 1}
MUTANT_EXAMPLES = cases.EXAMPLES_PER_OP  # per op a wrong adapter changes: the default budget, as a user's run draws
KILL_RATE = 90.0
# Findings within the budget against a real adapter, reported and awaiting a spec case and a known
# divergence (spec/divergences/<adapter>.yaml, with its measured reason): still found, or this list is stale.
# (adapter, dtype) -> a finding within the budget awaiting its case and known divergence. ONNX Runtime's
# float64 self_attention_v1 waited here until fuzz could take a generated-case divergence (fuzz_<op>).
PENDING = {}
_kills = {}


def fuzz_kill_rate(adapter_name, examples, seed):
    """{mutant: (caught?, ops fuzzed, calls)} for the adapter's wrong adapters whose changed ops the fuzzer covers
    (fuzz_kill_table.forward_mutants), each at one seed."""
    results = {}
    for mutant, module, covered in forward_mutants(adapter_name):
        caught, calls = fuzzed(mutant, module, covered, adapter_name, examples, seed)
        results[mutant] = (caught, covered, calls)
    return results


def percent(results):
    return 100.0 * sum(c for c, _, _ in results.values()) / len(results) if results else math.nan


@pytest.fixture
def kills(requested_adapter):
    """{mutant: (caught, ops, calls)} for the adapter's wrong variants the fuzzer covers, once a session."""
    if requested_adapter not in _kills:
        results = fuzz_kill_rate(requested_adapter, MUTANT_EXAMPLES, SEED)
        _kills[requested_adapter] = results
    return _kills[requested_adapter]


def test_the_adapter_passes_its_fuzz_budget(requested_adapter, tmp_path, capsys):
    adapter = registry.load(requested_adapter)
    for i, dtype in enumerate(adapter.DTYPES):
        examples = BUDGET["first"] if i == 0 else BUDGET["other"]
        code = cli.main(
            [
                "fuzz",
                "--adapter",
                requested_adapter,
                "--examples",
                str(examples),
                "--seed",
                str(SEED),
                "--dtype",
                dtype,
                "--out",
                str(tmp_path),
            ]
        )
        out = capsys.readouterr()
        with capsys.disabled():
            print(
                f"\nfuzz budget {requested_adapter} {dtype}: {examples} cases per op: "
                f"{out.out.strip().splitlines()[-1] if out.out.strip() else out.err.strip()}"
            )
        if (requested_adapter, dtype) in PENDING:
            assert code == 1, f"{requested_adapter} {dtype}: no longer found; remove it from PENDING"
            assert PENDING[requested_adapter, dtype].split(":")[0] in out.out
            continue
        assert code == 0, f"{requested_adapter} {dtype}: a finding within the fuzz budget:\n{out.out}{out.err}"
    if any(a == requested_adapter for a, _ in PENDING):
        return
    assert not list(tmp_path.iterdir())


def test_its_one_ulp_adapter_passes_its_fuzz_budget_too(requested_adapter, tmp_path, capsys):
    """The adapter one ULP off everywhere stands for a correct kernel whose last step is faithful (issue 58): what
    `run` passes, fuzz must pass too, at the same budget as the adapter's own."""
    mutant = f"tests.mutants.{requested_adapter}__one_ulp_off"
    if not (ROOT / "tests" / "mutants" / f"{requested_adapter}__one_ulp_off.py").exists():
        pytest.fail(f"{mutant} is missing: every framework has its one-ULP adapter (tests/mutants/_one_ulp.py)")
    for i, dtype in enumerate(registry.load(requested_adapter).DTYPES):
        examples = BUDGET["first"] if i == 0 else BUDGET["other"]
        args = ["fuzz", "--adapter", mutant, "--examples", str(examples), "--seed", str(SEED), "--dtype", dtype]
        code = cli.main([*args, "--out", str(tmp_path)])
        out = capsys.readouterr()
        assert code == 0 or (requested_adapter, dtype) in PENDING, f"{mutant} {dtype}: accused:\n{out.out}{out.err}"


def test_the_fuzzer_finds_most_forward_op_mistakes(requested_adapter, kills, capsys):
    results = kills
    if not results:
        pytest.skip(f"{requested_adapter} has no wrong adapter whose mistake is in a forward op the fuzzer covers")
    from conftest import _ran  # the spec's own results on the wrong adapters, when test_adapter.py ran first

    caught = sorted(m.split(".")[-1] for m, (c, _, _) in results.items() if c)
    missed = sorted(m.split(".")[-1] for m, (c, _, _) in results.items() if not c)
    spec = [m for m in (m.split(".")[-1] for m in results) if m in _ran]
    spec_text = (
        f"the spec catches {sum(bool(_ran[m]['caught_by']) for m in spec)}/{len(spec)} of them"
        if spec
        else "the spec's kill rate: run tests/selfcheck/test_adapter.py in the same session"
    )
    with capsys.disabled():
        print(
            f"\nfuzz kill rate {requested_adapter} (seed {SEED}, {MUTANT_EXAMPLES} cases each): "
            f"{len(caught)}/{len(results)} = {percent(results):.0f}% of the forward-op wrong adapters; {spec_text}"
            + (f"; missed: {', '.join(missed)}" if missed else "")
        )
    assert percent(results) >= KILL_RATE, f"the fuzzer missed {missed}"


def _found(kills):
    results = kills
    caught = [m for m, (c, _, _) in results.items() if c]
    if not caught:
        pytest.skip("no wrong adapter the fuzzer finds here")
    return caught[0], results[caught[0]][1]


def _fuzz(mutant, ops, out, dtype=None):
    return cli.main(
        ["fuzz", "--adapter", mutant, "--examples", str(MUTANT_EXAMPLES), "--seed", str(SEED), "--out", str(out)]
        + [arg for op in ops for arg in ("--op", op)]
        + (["--dtype", dtype] if dtype else [])
    )


def test_a_finding_is_a_spec_case_and_a_standalone_reproducer(requested_adapter, kills, tmp_path, capsys):
    mutant, ops = _found(kills)
    assert _fuzz(mutant, ops, tmp_path / "out") == 1
    printed = capsys.readouterr()
    assert "FINDING" in printed.out and printed.err.count("\n") == 1, printed
    [case] = sorted((tmp_path / "out").glob("*.yaml"))
    [script] = sorted((tmp_path / "out").glob("*.py"))
    # Pasted at the end of a copy of the spec (cases is its last list), it validates.
    spec = tmp_path / "spec" / "attention.yaml"
    spec.parent.mkdir()
    shutil.copy(loader.SPEC_DIR / "attention.yaml", spec)
    with spec.open("a") as f:
        f.write("\n" + case.read_text())
    assert cli.main(["validate", str(spec)]) == 0, capsys.readouterr().err
    loaded = loader.load_file(spec)
    assert len(loaded.cases) == len(loader.load().cases) + 1
    # The reproducer runs with the framework and NumPy only: attention_conformance is made unimportable.
    source = script.read_text()
    if "NOT STANDALONE" in source:
        pytest.fail(f"{mutant}: the reproducer is not standalone: {source.splitlines()[8]}")
    isolated = tmp_path / "isolated"
    isolated.mkdir()
    shutil.copy(script, isolated / script.name)
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import runpy, sys; sys.modules['attention_conformance'] = None; "
            "sys.modules['tests'] = None; sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')",
            script.name,
        ],
        cwd=isolated,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1 and "REPRODUCED" in run.stdout, (run.returncode, run.stdout, run.stderr[-2000:])


# A reproducer is meant to run alone in a fresh interpreter, and importing the framework is most of that: 19 torch
# imports were 110 of this test's 157 s (AMD EPYC, 2 cores). So one interpreter sets the os.environ lines the
# reproducers of a group open with, then forks a child per reproducer that runs it whole as __main__ from there. The
# modules the first child imported are imported before the next fork (torch itself; torch.compiler.disable imports
# dynamo, 7 s more): a later reproducer finds them loaded, as its own run would load them, but no state an earlier
# one set (a framework switch, an environment variable, a global). Arguments: the results file, "alone" (each in its
# own folder) or "here", the opening lines, the scripts; it writes [[path, exit code, stdout, stderr], ...].
_FORKED = """
import importlib, json, os, runpy, sys, traceback
written, alone, opening, paths = sys.argv[1], sys.argv[2] == "alone", sys.argv[3], sys.argv[4:]
try:
    exec(compile(opening, "<the reproducers' opening lines>", "exec"), {"__name__": "__opening__", "os": os})
except BaseException:  # each reproducer meets it again in its own child, which reports it
    pass
results = []
for path in paths:
    out, err = path + ".stdout", path + ".stderr"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd, name in ((1, out), (2, err)):
                os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            if alone:
                os.chdir(os.path.dirname(path))
            sys.argv = [path]
            try:
                runpy.run_path(path, run_name="__main__")
                code = 0
            except SystemExit as exc:  # as the interpreter exits on it
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            with open(path + ".modules", "w") as f:
                json.dump([name for name in sys.modules if name != "__main__"], f)
            os._exit(code & 0xFF)
    status = os.waitpid(pid, 0)[1]
    if path == paths[0] and os.path.exists(path + ".modules"):
        with open(path + ".modules") as f:
            for name in json.load(f):
                try:
                    importlib.import_module(name)
                except BaseException:  # a module only its own import chain loads: the next child loads it so
                    pass
    with open(out) as o, open(err) as e:
        results.append([path, os.waitstatus_to_exitcode(status), o.read(), e.read()])
with open(written, "w") as f:
    json.dump(results, f)
"""


def _opening(source):
    """(the os.environ settings a reproducer makes before its first statement that is not an import or one of them,
    the variables they set): what a fork may have made before it starts the reproducer."""
    kept, variables = [], set()
    for node in ast.parse(source).body:
        target = ast.unparse(node.targets[0]) if isinstance(node, ast.Assign) else ""
        if target.startswith("os.environ["):
            kept.append(ast.unparse(node))
            variables.add(node.targets[0].slice.value)
        elif not isinstance(node, (ast.Import, ast.ImportFrom)) and not (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)  # a docstring
        ):
            break
    return "\n".join(kept), variables


def _reproduce(scripts, tmp_path):
    """{script: (exit code, stdout, stderr)}, each reproducer as if alone in a fresh interpreter (_FORKED): the
    standalone ones with the suite unimportable, each in a folder of its own; the others (closures a factory made:
    their header says so) where their adapter module imports, as that header says. A variable any reproducer's opening
    sets in os.environ is not passed on from this process (an adapter's import sets some): each must set it itself."""
    groups, unset = {}, set()
    for script in scripts:
        source = script.read_text()
        opening, variables = _opening(source)
        groups.setdefault(("NOT STANDALONE" not in source, opening), []).append(script)
        unset |= variables
    results = {}
    for n, ((alone, opening), group) in enumerate(groups.items()):
        copies = {}
        for i, script in enumerate(group):
            folder = tmp_path / "isolated" / f"{n}-{i}" if alone else script.parent
            folder.mkdir(parents=True, exist_ok=True)
            copies[str((folder / script.name).resolve())] = script
            if alone:
                shutil.copy(script, folder / script.name)
        written = tmp_path / f"reproduced-{n}.json"
        block = "import sys; sys.modules['attention_conformance'] = None; sys.modules['tests'] = None\n"
        run = subprocess.run(
            [sys.executable, *(["-I"] if alone else []), "-c", (block if alone else "") + _FORKED, str(written)]
            + [("here", "alone")[alone], opening, *copies],
            cwd=tmp_path if alone else ROOT,
            env={k: v for k, v in os.environ.items() if k not in unset},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0 and written.exists(), (run.returncode, run.stdout[-1000:], run.stderr[-2000:])
        for path, exit_code, out, err in json.loads(written.read_text()):
            results[copies[path]] = (exit_code, out, err)
    return results


def test_each_reproducer_runs_as_if_alone_and_its_failure_is_its_own(tmp_path):
    """_reproduce's children: no state from the reproducer before, the suite unimportable, an exit 0, a crash and a
    message to SystemExit each told apart, and an os.environ variable a reproducer sets only where it sets it."""
    scripts = {
        "sets": "import os\nimport json\njson.CARRIED = 1\nprint('REPRODUCED')\nraise SystemExit(1)\n",
        "finds": "import json\nprint('carried' if hasattr(json, 'CARRIED') else 'REPRODUCED')\nraise SystemExit(1)\n",
        "passes": "print('not reproduced')\n",
        "suite": "import attention_conformance\n",
        "says": "raise SystemExit('why')\n",
        "own_variable": "import os\nos.environ['A_VARIABLE'] = 'its own'\nprint(os.environ['A_VARIABLE'])\n",
        "needs_variable": "import os\nprint(os.environ.get('A_VARIABLE', 'not set'))\n",
    }
    for name, source in scripts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.py").write_text(source)
    os.environ["A_VARIABLE"] = "this process's"
    try:
        ran = _reproduce([tmp_path / name / f"{name}.py" for name in scripts], tmp_path / "run")
    finally:
        del os.environ["A_VARIABLE"]
    got = {path.stem: (code, out.strip(), err.strip().splitlines()[-1:]) for path, (code, out, err) in ran.items()}
    assert got == {
        "sets": (1, "REPRODUCED", []),
        "finds": (1, "REPRODUCED", []),
        "passes": (0, "not reproduced", []),
        "suite": (1, "", ["ModuleNotFoundError: import of attention_conformance halted; None in sys.modules"]),
        "says": (1, "", ["why"]),
        "own_variable": (0, "its own", []),
        "needs_variable": (0, "not set", []),  # set by this process, and by another reproducer only for itself
    }


def test_every_findings_reproducer_runs_and_exits_1(requested_adapter, kills, tmp_path):
    caught = [m for m, (c, _, _) in kills.items() if c]
    if not caught:
        pytest.skip("no wrong adapter the fuzzer finds here")
    scripts = {}
    for mutant in caught:
        out = tmp_path / mutant.split(".")[-1]
        module = registry.load(mutant)
        found = [
            d for d in getattr(module, "RUN_IN", module.DTYPES[:1]) if _fuzz(mutant, kills[mutant][1], out, d) == 1
        ]
        assert found, f"{mutant}: caught by the kill rate's run, not by the command"
        [scripts[mutant]] = sorted(out.glob("*.py"))
    ran = _reproduce(list(scripts.values()), tmp_path)
    problems = [
        f"{mutant}: exit {ran[script][0]}: {(ran[script][1] + ran[script][2])[-600:]}"
        for mutant, script in scripts.items()
        if ran[script][0] != 1 or "REPRODUCED" not in ran[script][1]
    ]
    assert len(ran) == len(scripts) and not problems, "\n".join(problems)


def test_the_same_seed_gives_the_same_finding(requested_adapter, kills, tmp_path):
    mutant, ops = _found(kills)
    texts = []
    for run in ("a", "b"):
        assert _fuzz(mutant, ops, tmp_path / run) == 1
        texts.append({p.name: p.read_text() for p in (tmp_path / run).iterdir()})
    assert texts[0] == texts[1]


def test_bad_usage_is_one_line_and_exit_2(capsys):
    assert cli.main(["fuzz", "--adapter", "reference", "--dtype", "float16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "float16" in err
    assert cli.main(["fuzz", "--adapter", "reference", "--op", "dropout"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
