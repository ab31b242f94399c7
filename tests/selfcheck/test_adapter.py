"""The suite checking itself, for each adapter under test: isolation, and wrong adapters caught."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attention_conformance import plugin
from attention_conformance.cases import divergences, loader
from attention_conformance.contract import ops, registry
from attention_conformance.run import declarations
from attention_conformance.run.verify import verify_all

ROOT = Path(__file__).resolve().parent.parent.parent
# Modules a built-in adapter imports (derived from the adapter files, so a new framework is covered
# without editing this test), and the names a framework could reach the suite through.
# Every top-level module an adapter imports, at the top or inside a function (flax is imported only
# by the layer cases), but the standard library, NumPy and the suite's own ports.
FRAMEWORKS = tuple(
    sorted(
        {
            line.split()[1].split(".")[0]
            for name in registry.NAMES
            for path in registry.sources(name)
            for line in map(str.strip, path.read_text().splitlines())
            if line.startswith(("import ", "from "))
            and line.split()[1].split(".")[0]
            not in {*sys.stdlib_module_names, "numpy", "ml_dtypes", "attention_conformance"}
        }
    )
)


def test_the_framework_list_is_derived_from_the_adapters():
    assert {"torch", "tensorflow", "keras", "jax", "flax"} <= set(FRAMEWORKS), FRAMEWORKS


def test_importing_the_suite_imports_no_framework(requested_adapter):
    """Import the harness in a fresh process, then load the adapter: only then may a framework appear."""
    code = (
        "import json, sys\n"
        "import attention_conformance.cli, attention_conformance.plugin, attention_conformance.run.verify\n"
        "from attention_conformance.contract import registry\n"
        f"frameworks = {FRAMEWORKS!r}\n"
        "before = [m for m in frameworks if m in sys.modules]\n"
        f"registry.load({requested_adapter!r})\n"
        "after = [m for m in frameworks if m in sys.modules]\n"
        "print(json.dumps([before, after]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    before, after = json.loads(out.stdout.splitlines()[-1])
    assert before == [], f"importing the suite loaded {before}"
    # The proof means something only where the framework is installed and loads on demand.
    assert (requested_adapter in after) == (requested_adapter in FRAMEWORKS), (
        f"loading {requested_adapter} imported {after}"
    )


def test_the_adapter_passes_its_self_check(requested_adapter):
    """What `attention-conformance check` asks of an outsider's adapter, every built-in one meets."""
    from attention_conformance.tools import preflight

    assert preflight.problems(registry.load(requested_adapter)) == []


def test_registry_is_what_tox_runs(requested_adapter):
    import configparser

    from attention_conformance import modes

    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")

    def names(text):
        return sorted(
            set(e.strip() for e in text.replace("\n", ",").split(",") if e.strip())
            - {"prerequisites", "suite", "summary", "portability", "browser"}
        )

    lines = tox["tox"]["labels"].strip().splitlines()
    labels = {key.strip(): value for key, value in (line.split("=", 1) for line in lines)}
    main_job, full = labels["conformance"], labels["full"]
    selfcheck = tox[
        "testenv:{" + ",".join(registry.NAMES) + "}-selfcheck"
    ]  # KeyError: the section's adapters are not the registry
    selfchecks = sorted(f"{name}-selfcheck" for name in registry.NAMES)
    other_modes = [s.removeprefix("testenv:{").removesuffix("}") for s in tox.sections() if "-compiled," in s][0]
    columns = tuple(other_modes.split(","))
    assert all(modes.split(c)[0] in registry.NAMES and modes.split(c)[1] for c in columns), other_modes
    module = registry.load(requested_adapter)  # this environment's framework: each of its other modes has a column
    wanted = {modes.column(requested_adapter, m, module.MODE) for m in modes.declared(module)} - {requested_adapter}
    assert wanted <= set(columns), f"tox runs no column for {sorted(wanted - set(columns))}"
    # Two tiers (issue 54): the README's test command runs each framework's first mode and the self-checks; the full
    # tier adds the other modes and the portability run, and the summary again with their columns.
    assert names(tox["tox"]["env_list"]) == sorted(registry.NAMES + tuple(selfchecks)), "tox env_list"
    assert names(full) == sorted(columns), "tox label full: the other modes"
    assert {"portability", "summary"} <= set(e.strip() for e in full.split(",")), "the full tier's portability run"
    assert names(main_job) == sorted(registry.NAMES), "tox label conformance (the main job): no self-checks"
    assert names(tox["testenv:summary"]["depends"]) == sorted(registry.NAMES + tuple(selfchecks) + columns), (
        "summary's depends"
    )
    assert names(tox["testenv:benchmark"]["depends"]) == sorted(registry.NAMES), "benchmark's depends"
    assert names(tox["testenv:portability"]["depends"]) == sorted(registry.NAMES), "portability's depends"
    summary = tox["testenv:summary"]["commands"].split()
    assert sorted(summary[i + 1] for i, word in enumerate(summary) if word == "--adapter") == sorted(registry.NAMES), (
        "the summary names every built-in adapter, so one that did not report is MISSING"
    )
    ran = re.findall(
        r"^(\w+): \S+/(\w+)/bin/python -m pytest --adapter (\w+) tests/selfcheck ",
        selfcheck["commands"].replace("{/}", "/"),
        re.M,
    )
    assert sorted(ran) == [(n, n, n) for n in sorted(registry.NAMES)], (
        "each <adapter>-selfcheck runs tests/selfcheck/test_adapter.py in its own framework's environment"
    )
    assert "browser" in tox["tox"]["env_list"], "the page's browser test is part of the tests (tox -p auto)"
    # The suite runs the whole folder but what it leaves to the selfchecks and the browser, so a new test file is
    # collected; each path it leaves out must be another environment's.
    suite = tox["testenv:suite"]["commands"]
    assert re.search(r"^pytest tests( --ignore=\S+)*( --durations=\d+)? \{posargs\}$", suite, re.M), suite
    others = selfcheck["commands"] + tox["testenv:browser"]["commands"] + tox["testenv"]["commands"]
    unrun = [path for path in re.findall(r"--ignore=(\S+)", suite) if path not in others]
    assert unrun == [], "test files no tox environment runs"


def test_wrong_adapter_is_caught(mutant, goldens, record_mutant, known_divergences):
    name = mutant
    first = registry.load(f"tests.mutants.{name}")
    # A wrong adapter whose bug only a mode shows (RUN_MODE: a compiler's path) runs in that mode's column.
    mode = getattr(first, "RUN_MODE", None)
    column = f"{name}-{mode}" if mode else name
    module = registry.load(f"tests.mutants.{column}")
    base = name.split("__")[0]
    # A mutant inherits its base adapter's known divergences, in its mode: failing there catches nothing.
    known = divergences.declared(f"{base}-{mode}", registry.load(f"{base}-{mode}")) if mode else known_divergences
    # The bugs here are dtype-blind, so a mutant runs in its adapter's first dtype unless it names others.
    dtypes = getattr(module, "RUN_IN", module.DTYPES[:1])
    # Only the cases of ops the mutant replaces (and, for a mode's bug, those it must fail): every other case
    # would run the real adapter's own function object (`from <adapter> import *`), already run by the
    # conformance job.
    real = registry.load(base)
    replaced = {op for op in ops.OPS if getattr(first, op, None) is not getattr(real, op, None)}
    spec = loader.load()
    replaced |= {spec.cases[case_id].op for case_id in module.MUST_FAIL} if mode else set()
    spec = dataclasses.replace(spec, cases={k: c for k, c in spec.cases.items() if c.op in replaced})

    def run(column, module, known):
        # A bug (or a convention with no side) declared for the base adapter leaves the test out; a precision, a raise
        # or a convention's side judges it, as in a run.
        prefix = column.replace(name, base, 1)
        return verify_all(
            spec,
            column,
            module,
            goldens,
            dtypes,
            lambda t: declarations.one_for(t.replace(f"[{column}-", f"[{prefix}-"), known),
        )

    results = run(column, module, known)
    families = {case.family for case in spec.cases.values()}
    record_mutant(name, module.EXPECTED, results, families)
    caught = {t: msg for t, (outcome, msg) in results.items() if outcome in ("failed", "error")}
    if module.EXPECTED == "passes":
        assert caught == {}, f"{name} should pass but failed: {next(iter(caught.items()))}"
        return
    assert caught, f"{name} passed every case: the suite cannot tell this bug from a conforming adapter"
    for case_id in module.MUST_FAIL:
        outcomes = {t: results[t][0] for t in results if t.endswith(f"-{case_id}]")}
        assert "failed" in outcomes.values(), f"{name}: case {case_id} should give wrong numbers, got {outcomes}"
    if mode:  # the same code in the adapter's first mode conforms: the bug is the mode's alone
        eager = run(name, first, known_divergences)
        wrong = {t: msg for t, (outcome, msg) in eager.items() if outcome in ("failed", "error")}
        assert wrong == {}, f"{name} fails in its first mode too, not only {mode}: {next(iter(wrong.items()))}"


def test_two_runs_give_bit_identical_results(deterministic_adapter):
    """The whole spec's outputs, computed in two fresh processes at once, must match to the bit.

    Identical outputs mean identical errors against the same expectations, so the same pass/fail
    set. Run for the reference and torch (the cheapest framework to import).
    """
    code = (
        "import hashlib, numpy as np\n"
        "from attention_conformance.cases import golden, loader, plan\n"
        "from attention_conformance.contract import registry\n"
        "from attention_conformance.run.calls import outputs\n"
        f"name = {deterministic_adapter!r}\n"
        "adapter, loaded, goldens = registry.load(name), loader.load(), golden.Goldens()\n"
        "digest = hashlib.sha256()\n"
        "calls = dict.fromkeys("
        "(t.case.id, t.dtype) for t in plan.tests(loaded, {name: adapter}) if not t.not_applicable)\n"
        "for case_id, dtype in calls:\n"
        "    try:\n"
        "        items = sorted(outputs(name, adapter, loaded.cases[case_id], dtype, goldens).items())\n"
        "    except Exception as exc:  # an error (a known divergence) must be the same error every run\n"
        "        items = [('error', np.frombuffer(f'{type(exc).__name__}: {exc}'.encode(), np.uint8))]\n"
        "    for key, value in items:\n"
        "        digest.update(f'{case_id}/{dtype}/{key}'.encode() + np.asarray(value).tobytes())\n"
        "print(digest.hexdigest())\n"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    digests = [run.communicate()[0].split()[-1] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert digests[0] == digests[1]


def test_torch_float32_matmul_pin_is_load_bearing(torch_adapter):
    """torch.set_float32_matmul_precision("medium") runs float32 matmuls of size >= 32 in bfloat16
    on CPUs with AMX: far outside float32 accuracy. The torch adapter's pin_numerics (the suite calls it)
    pins "highest"."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(2))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # A float32 dot product of 64 terms errs by at most about 64 eps x sum |a_i b_i| (Higham);
    # bfloat16 products err by about 2^-8 of the same sum, 2^15 times more.
    budget = 64 * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))

    def worst(precision):
        torch.set_float32_matmul_precision(precision)
        try:
            return float((np.abs((torch.from_numpy(a) @ torch.from_numpy(b)).numpy() - exact) / budget).max())
        finally:
            plugin.state.loaded[torch_adapter].pin_numerics()

    assert torch.get_float32_matmul_precision() == "highest"
    assert worst("highest") <= 1
    medium = worst("medium")
    if medium <= 1:
        pytest.skip(f"on this CPU ({_cpu()}) 'medium' leaves float32 matmuls unchanged (no AMX): nothing to show here")
    assert medium > 100, f"'medium' moved a 64x64 float32 matmul by {medium:.3g}x the float32 error bound"


def test_a_copied_compile_cache_is_read_not_compiled_again(jax_adapter, tmp_path):
    """By default jax keys each compiled entry on the cache's own folder (it names folders inside it for XLA's GPU
    caches in the compile options): a copied or moved cache missed every entry, and the benchmark's cold main job,
    run on a copy, compiled everything again (2,389 compiles, 136 s). From a copy the same call writes nothing new."""
    code = (
        "import numpy as np\n"
        "from attention_conformance.contract import registry\n"
        f"registry.load({jax_adapter!r}).softmax(np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    first, copy = tmp_path / "first", tmp_path / "copy"
    subprocess.run([sys.executable, "-c", code], env=env | {"ATTENTION_CONFORMANCE_CACHE": str(first)}, check=True)
    shutil.copytree(first, copy)
    written = sorted(p.name for p in (copy / "xla").iterdir())
    assert written, "the first call compiled nothing into the cache"
    subprocess.run([sys.executable, "-c", code], env=env | {"ATTENTION_CONFORMANCE_CACHE": str(copy)}, check=True)
    assert sorted(p.name for p in (copy / "xla").iterdir()) == written


def _cpu():
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def test_adding_a_framework_names_every_file_that_lists_the_frameworks():
    """CONTRIBUTING.md's "Adding a framework" list is the set of files a new built-in adapter must appear in:
    every tracked file (outside adapters/, the README, CONTRIBUTING.md and docs) that names all the built-in
    adapters is on it, and every file on it exists; each built-in adapter has its wrong variants."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("**Adding a framework**") : text.index("The registry is the list of files")]
    listed = {line.split("`")[1] for line in section.splitlines() if line.startswith("- `")}
    assert listed == {
        "adapters/<name>.py",
        "tox.ini",
        ".github/workflows/conformance.yml",
        "pyproject.toml",
        "tests/mutants/<name>__<bug>.py",
    }, listed
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split() or None
    files = tracked or [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".tox" not in p.parts]
    naming_all = {
        f
        for f in files
        if not f.startswith(("adapters/", "docs/", "README", "CONTRIBUTING", "golden/", "spec/documents"))
        and all(re.search(rf"\b{n}\b", (ROOT / f).read_text(errors="ignore")) for n in registry.NAMES)
    }
    concrete = {f.replace("<name>", "*") for f in listed}
    assert naming_all <= {f for f in concrete if "*" not in f}, sorted(naming_all)
    for name in registry.NAMES:
        assert all(path.exists() for path in registry.sources(name))
        assert list((ROOT / "tests" / "mutants").glob(f"{name}__*.py")), (
            f"{name} has no wrong variant in tests/mutants/"
        )
