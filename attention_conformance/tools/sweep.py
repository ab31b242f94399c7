"""Measure the tolerance model (spec/model.yaml, attention_conformance.run.tolerance_model) over random shapes on
one framework: `attention-conformance sweep --adapter NAME [--examples N] [--seed S] [--json PATH]
[--model PATH]`, in that framework's environment.

Each example is one op of the contract (masked, causal, decoding, grouped heads textbook and fused,
a mask in the API's own convention) on a shape drawn from the seed alone (the same cases on every
framework): T log-uniform in 1..1024, head size 1..256, 1..16 query heads over K/V heads dividing
them, scores from tiny to the thermostat's scale (std up to 8, a fifth of them up to 2000: the
spec's x8 and x2000 cases), random masks, one visible key per row, causal on and off, decoding
offsets. d_in is small (1..8): the projection is not what this studies, and it keeps the float64
oracle cheap. For every dtype the adapter declares (and does not declare n/a for the op), the
adapter gets the inputs rounded to that dtype; the exact and plain computations (tolerance_model.attend)
run on the same rounded inputs, projected by the reference's own `project`.

Recorded per output: the share of the derived bound E it uses, max |got - exact| / E (tolerance_model.bound:
above 1 the derivation is wrong for this framework, or the framework is), the k it needs beside E and one ULP,
    needed_k = max over elements of (|got - exact| - E - ULP) / B,
its margin at the model (tolerance_model.judge, <= 1 within), and the shape. A dtype the plain computation
overflows (float16 scores beyond 65504) is skipped for that case and counted. An output beyond
the model on a path the adapter or spec/divergences/<adapter>.yaml declares divergent for a spec case the
sweep's case stands with, by fuzz's rule (cases/generated.py), or for fuzz_<op>, is reported as
declared, and excluded from the worst needed k; any other is a failure: exit status 1.

NumPy only at import: the framework comes in through registry.load.
"""

import json
import math
import sys
import time

import numpy as np

from attention_conformance import machine, safe_io
from attention_conformance.cases import divergences, generated, loader, plan
from attention_conformance.contract.ops import OPS
from attention_conformance.dtypes import DTYPES
from attention_conformance.run import tolerance_model
from attention_conformance.tools import sweep_cases

# --- what the adapter declares -------------------------------------------------------------------


def not_applicable(adapter, stands_with, op, dtype, inputs, output=None):
    """The adapter's reason it cannot run this, or None: what it defines (plan.undeclared), then a NOT_APPLICABLE
    key read as for the spec cases the sweep's case stands with (cases/generated.py)."""
    return plan.undeclared(adapter, op, dtype) or generated.not_applicable(
        adapter, stands_with, op, inputs, dtype, output
    )


# --- measuring -----------------------------------------------------------------------------------


def measure(dtype, got, exact, plain, derived, k):
    """{needed_k, bound_used, margin, baseline, error, front, worst} of one output."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != exact.shape:
        return {
            "margin": math.inf,
            "needed_k": math.inf,
            "problem": f"shape {list(got.shape)}, expected {list(exact.shape)}",
        }
    with np.errstate(all="ignore"):
        base = tolerance_model.baseline(dtype, exact, plain)
        derived = np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape)
        err = np.abs(got - exact)
        bad = ~np.isfinite(got) & np.isfinite(exact)
        fixed = derived + tolerance_model.last_place(dtype, exact)  # the allowance but for k x B
        over = float(np.max(err - fixed, initial=0.0))
        needed = math.inf if bad.any() else 0.0 if over <= 0 else over / base if base > 0 else math.inf
        verdict = tolerance_model.judge("", dtype, got, exact, plain, derived, k)
        used = math.inf if bad.any() else float(np.max(np.where(err == 0, 0.0, err / derived), initial=0.0))
    return {
        "needed_k": needed,
        "bound_used": used,
        "margin": float(verdict.margin),
        "baseline": base,
        "max_error": float(np.max(np.where(bad, np.inf, err), initial=0.0)),
        "front": None if bad.any() else front(err, fixed),
        "worst": verdict.describe(),
    }


def front(err, derived, most=64):
    """[[error, bound], ...]: elements no other element beats on both (a larger error at a smaller
    fixed allowance, E and one ULP). The margin at any k is max(error / (k x baseline + bound)) over these: a model can
    be tried without rerunning."""
    errs, bounds_ = err.reshape(-1), derived.reshape(-1)
    order = np.lexsort((-errs, bounds_))  # by bound, then the larger error first
    kept, best = [], 0.0
    for i in order:
        if errs[i] > best:
            kept.append([float(errs[i]), float(bounds_[i])])
            best = errs[i]
    if len(kept) > most:  # keep the largest errors: they decide the margin at any k worth having
        kept = sorted(kept, key=lambda p: -p[0])[:most]
    return kept


def margin_at(row, k):
    """The margin of a measured row at another k, from its front."""
    if row.get("front") is None:
        return math.inf
    return max((e / (k * row["baseline"] + d) if e > 0 else 0.0 for e, d in row["front"]), default=0.0)


def run(name, adapter, examples, seed, model, dtypes=None, ops=None, log=None):
    """Every measurement, one dict per (case, dtype, output)."""
    spec = loader.load()
    known = divergences.declared(name, adapter)
    rows = []
    for index in range(examples):
        case = sweep_cases.draw_case(seed, index)
        op = case["op"]
        if ops and op not in ops:
            continue
        stands_with = generated.declaring(spec, op, case["inputs"])  # what its declarations cover
        exacts, plains, derived = {}, {}, {}
        for dtype in dtypes or DTYPES:
            base = {"index": index, "op": op, "dtype": dtype, **case["shape"]}
            reason = not_applicable(adapter, stands_with, op, dtype, case["inputs"])
            if reason:
                continue  # not counted: what the adapter cannot run is not a measurement
            inputs = sweep_cases.rounded(case["inputs"], dtype)
            given = "float32" if dtype == "float64" else dtype  # float64's inputs are float32's numbers
            started = time.perf_counter()
            if given not in exacts:
                exacts[given] = sweep_cases.oracle(op, inputs)
            stand_in = tolerance_model.plain_dtype(dtype)
            if (given, stand_in) not in plains:
                plains[(given, stand_in)] = sweep_cases.oracle(op, inputs, rounding=stand_in)
            if (given, dtype) not in derived:
                derived[(given, dtype)] = sweep_cases.bound(op, inputs, dtype)
            exact, plain = exacts[given], plains[(given, stand_in)]
            oracle_s = time.perf_counter() - started
            started = time.perf_counter()
            try:
                result = getattr(adapter, op)(**inputs)
                problem = None
            except Exception as exc:  # noqa: BLE001 - what the adapter raises is its result for this case
                result, problem = (
                    None,
                    f"{op}() raised {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}",
                )
            call_s = time.perf_counter() - started
            names = OPS[op][1]
            if result is not None and len(names) == 1:
                result = {names[0]: result}
            k = model[dtype]
            for output in names:
                if not_applicable(adapter, stands_with, op, dtype, case["inputs"], output):
                    continue
                row = base | {"output": output, "oracle_s": round(oracle_s, 3), "call_s": round(call_s, 3)}
                if result is not None and not (isinstance(result, dict) and output in result):
                    problem = f"{op}() returned no {output!r}"
                if problem is not None:
                    row |= {"status": "raised", "problem": problem, "margin": math.inf, "needed_k": math.inf}
                elif not np.isfinite(plain[output]).all() or derived[given, dtype] is None:
                    row |= {"status": "skipped", "problem": f"the plain {stand_in} computation overflows"}
                else:
                    row |= measure(
                        dtype, result[output], exact[output], plain[output], derived[given, dtype][output], k
                    )
                    row["status"] = "within" if row["margin"] <= 1.0 else "beyond"
                if row["status"] in ("beyond", "raised"):
                    found = generated.divergence(name, known, stands_with, op, dtype, output)
                    if found:
                        row |= {"status": "declared", "declared_by": found[0], "declared_reason": found[1]}
                rows.append(row)
                if log:
                    log(row)
    return rows


# --- reporting -----------------------------------------------------------------------------------


def _shape_text(row):
    parts = [f"{row['op']}.{row['output']}", f"T={row['T']}", f"S={row['S']}", f"H={row['H']}"]
    if row.get("N", 1) > 1 or row.get("K", 1) > 1:
        parts.append(f"N={row['N']}/K={row['K']}")
    if row.get("B"):
        parts.append(f"B={row['B']}")
    parts.append(f"sigma={row['sigma']:g}")
    for key in ("mask", "api", "fill", "start"):
        if key in row:
            parts.append(f"{key}={row[key]}")
    if row.get("causal") and row["op"] in ("grouped_attention", "grouped_fused_attention"):
        parts.append("causal")
    return " ".join(parts)


def summarize(rows, model):
    """{dtype: {...}} over the measured rows: the worst needed k (declared divergences excluded)."""
    out = {}
    for dtype in DTYPES:
        mine = [r for r in rows if r["dtype"] == dtype]
        if not mine:
            continue
        measured = [r for r in mine if r["status"] in ("within", "beyond")]
        worst = max(measured, key=lambda r: r["needed_k"], default=None)
        worst_margin = max(measured, key=lambda r: r["margin"], default=None)
        out[dtype] = {
            "model": {"k": model[dtype]},
            "outputs": len(mine),
            "cases": len({r["index"] for r in mine}),
            "measured": len(measured),
            "beyond": sum(r["status"] == "beyond" for r in mine),
            "raised": sum(r["status"] == "raised" for r in mine),
            "declared": sum(r["status"] == "declared" for r in mine),
            "skipped": sum(r["status"] == "skipped" for r in mine),
            "worst_needed_k": worst["needed_k"] if worst else None,
            "worst_needed_k_at": _shape_text(worst) if worst else None,
            "worst_bound_used": max(r["bound_used"] for r in measured) if measured else None,
            "worst_margin": worst_margin["margin"] if worst_margin else None,
            "worst_margin_at": _shape_text(worst_margin) if worst_margin else None,
            "by_op": {
                op: max(r["needed_k"] for r in measured if r["op"] == op)
                for op in sweep_cases.SWEEP_OPS
                if any(r["op"] == op for r in measured)
            },
        }
    return out


def table(summary):
    lines = [
        "| dtype | model k | cases | outputs | skipped | declared | beyond "
        "| worst share of the bound | worst needed k | at | worst margin |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dtype, s in summary.items():
        needed = "-" if s["worst_needed_k"] is None else f"{s['worst_needed_k']:.3g}"
        margin = "-" if s["worst_margin"] is None else f"{s['worst_margin']:.3g}"
        used = "-" if s["worst_bound_used"] is None else f"{s['worst_bound_used']:.3g}"
        lines.append(
            f"| {dtype} | {s['model']['k']:g} | {s['cases']} | {s['measured']} "
            f"| {s['skipped']} | {s['declared']} | {s['beyond'] + s['raised']} | {used} | {needed} "
            f"| {s['worst_needed_k_at'] or '-'} | {margin} |"
        )
    lines.append("")
    lines.append(
        "worst needed k by op: "
        + "; ".join(
            f"{dtype} " + ", ".join(f"{op} {k:.3g}" for op, k in s["by_op"].items()) for dtype, s in summary.items()
        )
    )
    return "\n".join(lines)


def main(
    adapter_name,
    examples=sweep_cases.DEFAULT_EXAMPLES,
    seed=0,
    json_path=None,
    model_path=None,
    dtypes=None,
    ops=None,
    verbose=False,
):
    """`attention-conformance sweep`: measure, print the table, exit 1 on an undeclared output beyond the model."""
    from attention_conformance.contract import registry

    model_path = model_path or str(tolerance_model.MODEL_FILE)
    if examples < 1 or seed < 0:
        print("error: --examples must be at least 1 and --seed at least 0", file=sys.stderr)
        return 2
    try:  # one line and exit 2, as fuzz: an adapter that does not import, a model file that does not read
        model = tolerance_model.model(model_path)
        adapter = registry.load(adapter_name)
    except (registry.AdapterError, tolerance_model.BadInput, safe_io.UnsafeInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    version = adapter.version() if hasattr(adapter, "version") else "?"
    where = machine.one_line()
    started = time.perf_counter()

    def log(row):
        if verbose or row["status"] not in ("within", "skipped"):
            needed = row.get("needed_k", math.nan)
            print(
                f"  #{row['index']} {row['dtype']} {_shape_text(row)}: {row['status']}, needed k {needed:.3g}, "
                f"margin {row.get('margin', math.nan):.3g}"
                + (f" ({row['problem']})" if row.get("problem") else "")
                + (f" [declared by {row['declared_by']}]" if row.get("declared_by") else ""),
                flush=True,
            )

    rows = run(adapter_name, adapter, examples, seed, model, dtypes, ops, log)
    seconds = time.perf_counter() - started
    summary = summarize(rows, model)
    command = (
        f"attention-conformance sweep --adapter {adapter_name} --examples {examples} --seed {seed}"
        + "".join(f" --dtype {d}" for d in dtypes or ())
        + "".join(f" --op {o}" for o in ops or ())
    )
    print(f"{adapter_name} ({version}), {examples} examples, seed {seed}, model {model_path}")
    print(f"machine: {where}; {seconds:.0f} s")
    print(table(summary))
    failures = [r for r in rows if r["status"] in ("beyond", "raised")]
    if json_path:
        with open(json_path, "w") as f:
            json.dump(
                {
                    "adapter": adapter_name,
                    "version": version,
                    "machine": machine.describe(),
                    "machine_line": where,
                    "command": command,
                    "seconds": round(seconds, 1),
                    "model": model,
                    "summary": summary,
                    "rows": rows,
                },
                f,
                indent=1,
                default=float,
            )
    if failures:
        print(
            f"{len(failures)} output(s) beyond the model (not declared divergences): see the lines above",
            file=sys.stderr,
        )
        return 1
    print("every measured output is within the model")
    return 0
