"""Benchmarks of the suite itself, per framework, each in that framework's own environment.

    tox -m conformance && tox -e benchmark                 # every framework, a table, reports/benchmark.json
    attention-conformance benchmark --adapter torch       # one framework, in an environment that has it

Measures (1) the suite's overhead: the document spec (document values, mapping-table rows,
module forms, in every dtype) run in-process after the framework is imported, and the whole
spec's pytest run minus a bare import of the adapter; (2) the GPT-2-small-shaped case through the
textbook multi-head path and the framework's fused kernel (float32, median of 3 after a warm-up),
and the same as T grows (64 ... 1024 at GPT-2 small's width and heads); (3) peak memory of the
whole-spec pytest process against a bare import's; (4) the main job: every framework's whole-spec
run one after another, then the summary. Each figure is written with its target and the ratio.
Run after the main job, as the README says: the expectation and XLA caches are then warm.
"""

import contextlib
import dataclasses
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attention_conformance import CONFORMANCE_TESTS, SPEC_DIR, checks, contract, golden, loader, machine, reports

DOCUMENT_FAMILIES = ("document values", "mapping table rows", "module forms")
# Issue 16's targets, per framework unless said; a ratio above 1 is a miss.
TARGETS = {
    "document_spec_s": 1.0,
    "whole_spec_minus_import_s": 10.0,
    "memory_over_bare_mib": 300,
    "gpt2_textbook_s": 2.0,
    "gpt2_layer_s": 2.0,  # issue 17: the framework's own attention layer at GPT-2 small's shape
}
MAIN_JOB_TARGET_S = 60.0
SCALING_T = (64, 128, 256, 512, 1024)
# A hostile spec is refused within this wall time and memory (issue 13): measured here, not asserted
# by a test, since a test with a wall-clock bound fails on a busier machine.
REFUSAL_TARGETS = {"s": 2.0, "peak_mib": 300}


def alias_bomb(levels=9, width=9):
    """A flow sequence whose last anchor expands to width**levels numbers (9, 9: 387 million) in ~1 kB."""
    anchors = [f"&l0 [{', '.join(['0.5'] * width)}]"]
    anchors += [f"&l{n} [{', '.join([f'*l{n - 1}'] * width)}]" for n in range(1, levels + 1)]
    return "[" + ", ".join(anchors) + "]"


def refusals():
    """Wall seconds (median of 3) and peak MiB traced to validate the spec, and to refuse it with an
    alias bomb in place of its first case's inputs, against REFUSAL_TARGETS."""
    import tracemalloc

    spec_text = (SPEC_DIR / "attention.yaml").read_text()
    bombed = spec_text.replace("  - id: ", f"  - id: bomb\n    inputs: {alias_bomb()}\n    id_was: ", 1)
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, text in (("validate the spec", spec_text), ("refuse an alias bomb", bombed)):
            path = Path(scratch) / "attention.yaml"
            path.write_text(text)
            times, peak = [], 0.0
            for _ in range(3):
                tracemalloc.start()
                t = time.perf_counter()
                try:
                    loader.load_file(path)
                except loader.SpecError:
                    pass
                times.append(time.perf_counter() - t)
                peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
                tracemalloc.stop()
            rows[label] = {"s": statistics.median(times), "peak_mib": peak}
    return {label: row | {"ratios": {k: row[k] / REFUSAL_TARGETS[k] for k in REFUSAL_TARGETS}} for label, row in rows.items()}


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


def _whole_spec(name, scratch):
    return _child(
        "import json, resource, time, pytest\n"
        "t = time.perf_counter()\n"
        f"code = pytest.main(['-q', '-p', 'no:cacheprovider', '--adapter', {name!r}, {str(CONFORMANCE_TESTS)!r},"
        f" '--reports', {str(scratch)!r}])\n"
        "print(json.dumps({'s': time.perf_counter() - t, 'exit': int(code),"
        " 'rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )


def _timed(fn, kwargs, forget=lambda: None):
    fn(**kwargs)  # warm-up: compilation, allocator
    times = []
    for _ in range(3):
        forget()  # the reference remembers answers: each timed call computes
        t = time.perf_counter()
        fn(**kwargs)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _in_process(name):
    adapter, loaded, goldens = contract.load(name), loader.load(), golden.Goldens()
    document = dataclasses.replace(loaded, cases={k: c for k, c in loaded.cases.items() if c.family in DOCUMENT_FAMILIES})
    t = time.perf_counter()
    results = checks.run_all(document, name, adapter, goldens)
    document_s = time.perf_counter() - t
    has_fused = "fused_attention" not in getattr(adapter, "NOT_APPLICABLE", {})
    has_layer = hasattr(adapter, "attention_module") and "attention_module" not in getattr(adapter, "NOT_APPLICABLE", {})
    layers = dataclasses.replace(loaded, cases={k: c for k, c in loaded.cases.items() if c.family == "framework layers"})
    t = time.perf_counter()
    checks.run_all(layers, name, adapter, goldens)
    layers_s = time.perf_counter() - t

    def call(case_id, fn, T=None):
        kwargs = {k: checks._resolve(v, "float32", goldens) for k, v in loaded.cases[case_id].inputs.items()}
        if T is not None:
            kwargs["x"] = kwargs["x"][..., :T, :]  # the first T tokens, at GPT-2 small's width and heads
        return _timed(fn, {k: v for k, v in kwargs.items() if k in contract.CONTRACT[fn.__name__]},
                      getattr(adapter, "_REMEMBERED", {}).clear)

    scaling = [{"T": T,
                "textbook_s": call("gpt2_small_heads_causal", adapter.multi_head_attention, T),
                "fused_s": call("fused_gpt2_small_heads_causal", adapter.fused_attention, T) if has_fused else None}
               for T in SCALING_T]
    return {
        "document_spec_s": document_s,
        "document_spec_tests": len(results),
        "gpt2_textbook_s": scaling[-1]["textbook_s"],
        "gpt2_fused_s": scaling[-1]["fused_s"],
        "gpt2_layer_s": call("layer_mha_gpt2_small_heads_causal", adapter.attention_module) if has_layer else None,
        "layers_family_s": layers_s if has_layer else None,
        "scaling": scaling,
    }


def measure(name, scratch=None):
    with contextlib.ExitStack() as stack:
        scratch = scratch or stack.enter_context(tempfile.TemporaryDirectory())
        bare, whole = _bare_import(name), _whole_spec(name, scratch)
    row = {
        "adapter": name,
        "bare_import_s": bare["s"],
        "bare_import_rss_mib": bare["rss_mib"],
        "whole_spec_s": whole["s"],
        "whole_spec_exit": whole["exit"],
        "whole_spec_minus_import_s": whole["s"] - bare["s"],
        "peak_rss_mib": whole["rss_mib"],
        "memory_over_bare_mib": whole["rss_mib"] - bare["rss_mib"],
    } | _in_process(name)
    row["targets"] = TARGETS
    row["ratios"] = {key: row[key] / target for key, target in TARGETS.items() if row[key] is not None}
    return row


def _f(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def _vs(row, key, digits=2):
    """A figure with its target, marked where it misses."""
    return f"{_f(row[key], digits)}{' MISS' if row['ratios'].get(key, 0) > 1 else ''}"


def table(rows, main_job=None):
    head = ("| framework | bare import s | document spec s (target <= 1) | whole spec s | whole spec - import s (target <= 10) | "
            "GPT-2 textbook s (target <= 2) | GPT-2 fused s | GPT-2 layer s (target <= 2) | layers family s | bare import MiB | peak MiB | over bare MiB (target <= 300) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['adapter']} | {_f(r['bare_import_s'])} | {_vs(r, 'document_spec_s')} ({r['document_spec_tests']} tests) | "
                     f"{_f(r['whole_spec_s'])} | {_vs(r, 'whole_spec_minus_import_s')} | {_vs(r, 'gpt2_textbook_s', 3)} | "
                     f"{_f(r['gpt2_fused_s'], 3)} | {_vs(r, 'gpt2_layer_s', 3)} | {_f(r['layers_family_s'])} | {_f(r['bare_import_rss_mib'], 0)} | {_f(r['peak_rss_mib'], 0)} | "
                     f"{_vs(r, 'memory_over_bare_mib', 0)} |")
    if main_job:
        lines += ["", f"Main job (every framework's whole spec one after another, then the summary; tox's own set-up "
                      f"not included): {main_job['s']:.1f} s, target <= {main_job['target']:.0f} s"
                      f"{' MISS' if main_job['ratio'] > 1 else ''}"]
    lines += ["", "Attention cost as T grows (GPT-2 small's width 768, 12 heads, causal, float32; seconds, median of 3):", ""]
    ts = [s["T"] for s in rows[0]["scaling"]] if rows else []
    lines += ["| framework | path | " + " | ".join(f"T={t}" for t in ts) + " |", "|---|---|" + "---|" * len(ts)]
    for r in rows:
        for path in ("textbook", "fused"):
            if any(s[f"{path}_s"] is not None for s in r["scaling"]):
                lines.append(f"| {r['adapter']} | {path} | " + " | ".join(_f(s[f'{path}_s'], 3) for s in r["scaling"]) + " |")
    return "\n".join(lines)


def plot(rows, path):
    """reports/scaling.png: seconds against T, log-log, one colour per framework; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, r in enumerate(rows):
        colour = f"C{i}"
        for kind, style in (("textbook", "-"), ("fused", "--")):
            points = [(s["T"], s[f"{kind}_s"]) for s in r["scaling"] if s[f"{kind}_s"] is not None]
            if points:
                ax.plot(*zip(*points), style, marker="o", color=colour, label=f"{r['adapter']} {kind}")
    ax.set(xscale="log", yscale="log", xlabel="T (tokens)", ylabel="seconds per call",
           title="Causal attention, width 768, 12 heads, float32 (median of 3)")
    ax.set_xticks(SCALING_T, [str(t) for t in SCALING_T])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(adapter=None, envs=None, scratch=None):
    """One adapter here (its JSON on stdout), or every built-in adapter in its own tox environment."""
    if adapter:
        print(json.dumps(measure(adapter, scratch)))
        return 0
    envs = Path(envs or ".tox")
    rows, missing = [], []
    with tempfile.TemporaryDirectory() as shared:
        for name in contract.NAMES:
            python = envs / name / "bin" / "python"
            if not python.exists():
                missing.append(name)
                continue
            command = [str(python), "-m", "attention_conformance", "benchmark", "--adapter", name, "--scratch", shared]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
                missing.append(name)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        from attention_conformance import summary

        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            summary.main([shared], out=shared)
        summary_s = time.perf_counter() - t
    main_job = None if missing else {
        "s": sum(r["whole_spec_s"] for r in rows) + summary_s, "target": MAIN_JOB_TARGET_S,
        "how": "each framework's whole-spec pytest run (interpreter start and framework import included), one "
               "after another, then the summary; tox's own per-environment set-up is not included"}
    if main_job:
        main_job["ratio"] = main_job["s"] / MAIN_JOB_TARGET_S
    refused = refusals()
    reports.DEFAULT_DIR.mkdir(exist_ok=True)
    (reports.DEFAULT_DIR / "benchmark.json").write_text(json.dumps(
        {"machine": machine.describe(), "targets": TARGETS | {"main_job_s": MAIN_JOB_TARGET_S, "refusal": REFUSAL_TARGETS},
         "main_job": main_job, "frameworks": rows, "refusals": refused}, indent=1) + "\n")
    print(f"Measured on {machine.one_line()}\n")
    print(table(rows, main_job))
    print("\nSpec validation and refusal (wall seconds, median of 3; peak MiB traced; target "
          f"<= {REFUSAL_TARGETS['s']:.0f} s and <= {REFUSAL_TARGETS['peak_mib']} MiB):")
    for label, r in refused.items():
        miss = " MISS" if max(r["ratios"].values()) > 1 else ""
        print(f"  {label}: {r['s']:.3f} s, {r['peak_mib']:.1f} MiB{miss}")
    plotted = plot(rows, reports.DEFAULT_DIR / "scaling.png") if rows else None
    print(f"\n{plotted or 'no plot: matplotlib is not installed'}; figures in {reports.DEFAULT_DIR / 'benchmark.json'}")
    if missing:
        print(f"\nnot measured (no environment under {envs}, or it failed): {', '.join(missing)}; run `tox -m conformance` first")
    return 1 if missing else 0
