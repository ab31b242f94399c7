"""Benchmarks of the suite itself, per framework, each in that framework's own environment.

    tox -m conformance && tox -e benchmark                 # every framework, a table, reports/benchmark.json
    attention-conformance benchmark --adapter torch       # one framework, in an environment that has it

Measures (1) the suite's overhead: the document spec (document values, mapping-table rows,
module forms, in every dtype) run in-process after the framework is imported, and the whole
spec's pytest run minus a bare import of the adapter; (2) the GPT-2-small-shaped case through the
textbook multi-head path and the framework's fused kernel (float32, median of 3 after a warm-up);
(3) peak memory of the whole-spec pytest process against a bare import's.
"""

import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attention_conformance import CONFORMANCE_TESTS, checks, contract, golden, loader, reports

DOCUMENT_FAMILIES = ("document values", "mapping table rows", "module forms")
TARGETS = {"document_spec_s": 1.0, "memory_over_bare_mib": 300}


def _child(code):
    """Run Python code in a fresh process in this environment; return its last stdout line as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _bare_import(name):
    return _child(
        "import json, resource, time\n"
        "t = time.perf_counter()\n"
        f"from attention_conformance import contract; contract.load({name!r})\n"
        "print(json.dumps({'s': time.perf_counter() - t, 'rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )


def _whole_spec(name):
    with tempfile.TemporaryDirectory() as scratch:
        return _child(
            "import json, resource, time, pytest\n"
            "t = time.perf_counter()\n"
            f"code = pytest.main(['-q', '-p', 'no:cacheprovider', '--adapter', {name!r}, {str(CONFORMANCE_TESTS)!r},"
            f" '--reports', {scratch!r}])\n"
            "print(json.dumps({'s': time.perf_counter() - t, 'exit': int(code),"
            " 'rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
        )


def _in_process(name):
    adapter, loaded, goldens = contract.load(name), loader.load(), golden.Goldens()
    document = dataclasses.replace(loaded, cases={k: c for k, c in loaded.cases.items() if c.family in DOCUMENT_FAMILIES})
    t = time.perf_counter()
    results = checks.run_all(document, name, adapter, goldens)
    document_s = time.perf_counter() - t

    def gpt2(case_id, fn, **extra):
        case = loaded.cases[case_id]
        kwargs = {k: checks._resolve(v, "float32", goldens) for k, v in case.inputs.items()} | extra
        kwargs = {k: v for k, v in kwargs.items() if k in contract.CONTRACT[fn.__name__]}
        fn(**kwargs)  # warm-up: compilation, allocator
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn(**kwargs)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    return {
        "document_spec_s": document_s,
        "document_spec_tests": len(results),
        "gpt2_textbook_s": gpt2("gpt2_small_heads_causal", adapter.multi_head_attention),
        "gpt2_fused_s": None if "fused_attention" in getattr(adapter, "NOT_APPLICABLE", {})
        else gpt2("fused_gpt2_small_heads_causal", adapter.fused_attention),
    }


def measure(name):
    bare, whole = _bare_import(name), _whole_spec(name)
    return {
        "adapter": name,
        "bare_import_s": bare["s"],
        "bare_import_rss_mib": bare["rss_mib"],
        "whole_spec_s": whole["s"],
        "whole_spec_exit": whole["exit"],
        "whole_spec_minus_import_s": whole["s"] - bare["s"],
        "peak_rss_mib": whole["rss_mib"],
        "memory_over_bare_mib": whole["rss_mib"] - bare["rss_mib"],
    } | _in_process(name)


def table(rows):
    def f(v, digits=2):
        return "-" if v is None else f"{v:.{digits}f}"

    head = ("| framework | bare import s | document spec s (target < 1) | whole spec s | whole spec - import s | "
            "GPT-2 textbook s | GPT-2 fused s | bare import MiB | peak MiB | over bare MiB (target < 300) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['adapter']} | {f(r['bare_import_s'])} | {f(r['document_spec_s'])} ({r['document_spec_tests']} tests) | "
                     f"{f(r['whole_spec_s'])} | {f(r['whole_spec_minus_import_s'])} | {f(r['gpt2_textbook_s'], 3)} | "
                     f"{f(r['gpt2_fused_s'], 3)} | {f(r['bare_import_rss_mib'], 0)} | {f(r['peak_rss_mib'], 0)} | "
                     f"{f(r['memory_over_bare_mib'], 0)} |")
    return "\n".join(lines)


def main(adapter=None, envs=None):
    """One adapter here (its JSON on stdout), or every built-in adapter in its own tox environment."""
    if adapter:
        print(json.dumps(measure(adapter)))
        return 0
    envs = Path(envs or ".tox")
    rows, missing = [], []
    for name in contract.NAMES:
        python = envs / name / "bin" / "python"
        if not python.exists():
            missing.append(name)
            continue
        done = subprocess.run([str(python), "-m", "attention_conformance", "benchmark", "--adapter", name], capture_output=True, text=True)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
            missing.append(name)
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    reports.DEFAULT_DIR.mkdir(exist_ok=True)
    (reports.DEFAULT_DIR / "benchmark.json").write_text(json.dumps({"targets": TARGETS, "frameworks": rows}, indent=1) + "\n")
    print(table(rows))
    if missing:
        print(f"\nnot measured (no environment under {envs}, or it failed): {', '.join(missing)}; run `tox -m conformance` first")
    return 1 if missing else 0
