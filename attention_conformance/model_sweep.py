"""Measure the tolerance model (spec/model.yaml, attention_conformance.judge) over random shapes on
one framework: `python -m attention_conformance.model_sweep --adapter NAME [--examples N] [--seed S]
[--json PATH] [--model PATH]`, in that framework's environment.

Each example is one op of the contract (masked, causal, decoding, grouped heads textbook and fused,
a mask in the API's own convention) on a shape drawn from the seed alone (the same cases on every
framework): T log-uniform in 1..1024, head size 1..256, 1..16 query heads over K/V heads dividing
them, scores from tiny to the thermostat's scale (std up to 8, a fifth of them up to 2000: the
spec's x8 and x2000 cases), random masks, one visible key per row, causal on and off, decoding
offsets. d_in is small (1..8): the projection is not what this studies, and it keeps the float64
oracle cheap. For every dtype the adapter declares (and does not declare n/a for the op), the
adapter gets the inputs rounded to that dtype; the exact and plain computations (judge.attend)
run on the same rounded inputs, projected by the reference's own `project`.

Recorded per output: the share of the derived bound E it uses, max |got - exact| / E (judge.bound:
above 1 the derivation is wrong for this framework, or the framework is), the k it needs beside E,
    needed_k = max over elements of (|got - exact| - E) / B,
its margin at the model (judge.judge, <= 1 within), and the shape. A dtype the plain computation
overflows (float16 scores beyond 65504) is skipped for that case and counted. An output beyond
the model on a path the adapter or spec/known_divergences.yaml declares divergent for some case
of the same op, output and dtype (float64 computed with float32 accuracy, ...) is reported as
declared, and excluded from the worst needed k; any other is a failure: exit status 1.

NumPy only at import: the framework comes in through contract.load.
"""

import argparse
import json
import math
import sys
import time

import numpy as np

from attention_conformance import divergences, judge, loader, machine, plan
from attention_conformance.adapters import reference
from attention_conformance.contract import DTYPES, OPS, np_dtype

SWEEP_OPS = (
    "masked_attention",
    "causal_attention",
    "decode_attention",
    "grouped_attention",
    "grouped_fused_attention",
    "mask_conventions",
)
MAX_T, MAX_H, MAX_HEADS, MAX_D_IN = 1024, 256, 16, 8
CELLS = 1 << 21  # at most B x N x T x S score entries per case: T = 1024 gets 2 heads, T = 512 gets 8
DECODE_STEPS = 64  # at most this many new tokens in a decoding case (the stepwise path loops in Python)
LARGE_LOGITS = 0.2  # the share of cases whose scaled scores' std is 8..2000 (else 0.05..8)
DEFAULT_EXAMPLES = 150


# --- the cases -----------------------------------------------------------------------------------


def _log_uniform_int(rng, low, high):
    return int(min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high + 0.5)))))))


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _mask(rng, shape, kind):
    """A [.., T, S] mask, True = hidden, never a row with every key hidden (that is a convention)."""
    T, S = shape[-2:]
    if kind == "one_visible":
        hidden = np.ones(shape, dtype=bool)
        keep = rng.integers(0, S, size=shape[:-1])
        np.put_along_axis(hidden, keep[..., None], False, axis=-1)
        return hidden
    hidden = rng.random(shape) < rng.uniform(0.05, 0.95)
    if kind == "causal_random":
        hidden |= np.arange(S)[None, :] > np.arange(T)[:, None]
        diagonal = np.arange(min(T, S))
        hidden[..., diagonal, diagonal] = False  # each query sees itself
    empty = hidden.all(axis=-1)
    if empty.any():
        keep = rng.integers(0, S, size=shape[:-1])
        rows = np.nonzero(empty)
        hidden[rows + (keep[rows],)] = False
    return hidden


def draw_case(seed, index):
    """Example `index` of `seed`: {"op", "inputs" (float32 arrays, Python scalars, a bool mask),
    "shape" (what to report)}. Depends on the seed and index only, never on the adapter."""
    rng = np.random.default_rng([seed, index])
    op = SWEEP_OPS[int(rng.integers(len(SWEEP_OPS)))]
    T = _log_uniform_int(rng, 1, MAX_T)
    H = _log_uniform_int(rng, 1, MAX_H)
    d_in = int(rng.integers(1, MAX_D_IN + 1))
    grouped = op in ("grouped_attention", "grouped_fused_attention")
    N = int(rng.integers(1, MAX_HEADS + 1)) if grouped else 1
    K = int(rng.choice(_divisors(N)))
    batched = op in ("decode_attention", "grouped_attention", "grouped_fused_attention", "mask_conventions") or (
        op == "causal_attention" and rng.random() < 0.5
    )
    B = int(rng.integers(1, 3)) if batched else 1
    if B * N * T * T > CELLS:  # big shapes: fewer heads and one sequence, so the float64 oracle stays cheap
        B = 1
        allowed = max(1, CELLS // (T * T))
        if N > allowed:
            N = int(rng.integers(1, min(allowed, MAX_HEADS) + 1))
            K = int(rng.choice(_divisors(N)))
    large = rng.random() < LARGE_LOGITS
    sigma = float(
        math.exp(rng.uniform(math.log(8.0), math.log(2000.0)) if large else rng.uniform(math.log(0.05), math.log(8.0)))
    )
    lead = (B,) if batched else ()
    positive = rng.random() < 0.3  # torch.rand-like inputs, as the documents': correlated scores
    x = (rng.random(lead + (T, d_in)) if positive else rng.standard_normal(lead + (T, d_in))).astype(np.float32)
    # x ~ N(0, 1) and W ~ N(0, s^2) make q.k / sqrt(H) ~ N(0, (d_in s^2)^2): s^2 = sigma / d_in
    s = math.sqrt(sigma / d_in)
    inputs = {
        "x": x,
        "w_query": (s * rng.standard_normal((d_in, N * H))).astype(np.float32),
        "w_key": (s * rng.standard_normal((d_in, K * H))).astype(np.float32),
        "w_value": (rng.standard_normal((d_in, K * H)) / math.sqrt(d_in)).astype(np.float32),
    }
    shape = {
        "T": T,
        "S": T,
        "H": H,
        "N": N,
        "K": K,
        "B": B if batched else 0,
        "d_in": d_in,
        "sigma": round(sigma, 4),
        "inputs": "uniform" if positive else "normal",
    }
    if op == "masked_attention":
        kind = str(rng.choice(["random", "one_visible", "causal_random"]))
        inputs["mask"] = _mask(rng, (T, T), kind)
        shape["mask"] = kind
    elif op == "mask_conventions":
        kind = str(rng.choice(["random", "one_visible", "causal_random"]))
        inputs["mask"] = _mask(rng, (B, T, T), kind)
        inputs["api"] = str(rng.choice(["bool", "additive"]))
        inputs["fill"] = str(rng.choice(["neg_inf", "dtype_min"]))
        shape |= {"mask": kind, "api": inputs["api"], "fill": inputs["fill"]}
    elif op == "decode_attention":
        start = T - 1 if rng.random() < 0.5 else T - int(rng.integers(1, min(T, DECODE_STEPS) + 1))
        inputs["start"] = start
        shape |= {"T": T - start, "start": start}
    elif grouped:
        inputs |= {"num_heads": N, "num_kv_heads": K, "causal": bool(rng.random() < 0.5)}
        shape["causal"] = inputs["causal"]
    if op == "causal_attention":
        shape["causal"] = True
    return {"index": index, "op": op, "inputs": inputs, "shape": shape}


def rounded(inputs, dtype):
    """The inputs as the adapter gets them in `dtype` (float32 data cast to it, as the spec's)."""
    return {
        name: value.astype(np_dtype(dtype)) if isinstance(value, np.ndarray) and value.dtype == np.float32 else value
        for name, value in inputs.items()
    }


def _heads(t, n):
    """(.., T, n*H) -> (.., n, T, H): head n is columns n*H:(n+1)*H."""
    return np.swapaxes(t.reshape(t.shape[:-1] + (n, t.shape[-1] // n)), -3, -2)


def oracle(op, inputs, rounding=None):
    """{output: float64 array}: the exact computation (rounding None) or the plain one in `rounding`,
    on these inputs, through judge.attend."""
    x, wq, wk, wv = (np.asarray(inputs[n], dtype=np.float64) for n in ("x", "w_query", "w_key", "w_value"))
    T = x.shape[-2]
    keys, values = reference.project(x, wk), reference.project(x, wv)
    if op in ("grouped_attention", "grouped_fused_attention"):
        N = inputs["num_heads"]
        q = _heads(reference.project(x, wq), N)
        k, v = (judge.share_kv_heads(_heads(t, inputs["num_kv_heads"]), N) for t in (keys, values))
        out = judge.attend(q, k, v, judge.hidden_keys(T, T, causal=inputs["causal"]), rounding=rounding)
        return {"heads": out["out"]}
    if op == "decode_attention":
        q = reference.project(x[..., inputs["start"] :, :], wq)
        out = judge.attend(q, keys, values, judge.hidden_keys(q.shape[-2], T, causal=True), rounding=rounding)
        return {"context": out["out"], "stepwise": out["out"]}
    q = reference.project(x, wq)
    mask = inputs.get("mask")
    out = judge.attend(
        q, keys, values, judge.hidden_keys(T, T, mask, causal=op == "causal_attention"), rounding=rounding
    )
    if op == "mask_conventions":
        return {"context": out["out"]}
    return {"weights": out["weights"], "context": out["out"]}


def bound(op, inputs, dtype):
    """{output: the derived bound in dtype}, from the reference's own steps on these inputs."""
    try:
        found = judge.bound(dtype, getattr(reference, op), **inputs)
    except judge.Overflow:
        return None  # a stored step overflows: skipped, as an overflowing plain output is
    return found if isinstance(found, dict) else {OPS[op][1][0]: found}


# --- what the adapter declares -------------------------------------------------------------------


def _params(inputs):
    return {name: value for name, value in inputs.items() if isinstance(value, (bool, int, str))}


def not_applicable(adapter, op, dtype, inputs, output=None):
    """The adapter's reason it cannot run this, or None (its NOT_APPLICABLE keys: a dtype, an op,
    'op/output', 'param=value'; spec case ids name nothing here)."""
    if not hasattr(adapter, op):
        return f"the adapter does not define {op}()"
    if dtype not in adapter.DTYPES:
        return f"{dtype} is not in the adapter's DTYPES"
    reasons = getattr(adapter, "NOT_APPLICABLE", {})
    return next((reasons[k] for k in plan.keys_of(op, [], _params(inputs), dtype, output) if k in reasons), None)


def declared(name, known, spec, op, output, dtype, inputs):
    """(spec case, reason) where a known divergence covers a case of this op, output and dtype that
    is not a convention case (fully masked rows, causal alignment: the sweep has none), with the
    same mask API (and fill, for an additive mask), and not a multi-query case's (one K/V head) for
    grouped heads; else None."""
    for case in spec.cases.values():
        if case.op != op or case.convention or output not in case.expect:
            continue
        given = {
            n: v for n, v in case.inputs.items() if n == "api" or (n == "fill" and case.inputs.get("api") == "additive")
        }
        if any(inputs.get(n) != v for n, v in given.items()):
            continue
        multi_query = [i.get("num_kv_heads") == 1 and i.get("num_heads", 1) > 1 for i in (case.inputs, inputs)]
        if multi_query[0] and not multi_query[1]:
            continue  # said of multi-query attention only (one K/V head for several query heads)
        if (
            isinstance(case.inputs.get("x"), dict)
            and case.inputs["x"].get("shape", [0, 0])[-2] == 1
            and np.shape(inputs["x"])[-2] != 1
        ):
            continue  # said of one token only
        reason = divergences.reason_for(plan.test_id(output, name, dtype, case.id), known)
        if reason:
            return case.id, reason
    return None


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
        base = judge.baseline(dtype, exact, plain)
        derived = np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape)
        err = np.abs(got - exact)
        bad = ~np.isfinite(got) & np.isfinite(exact)
        over = float(np.max(err - derived, initial=0.0))
        needed = math.inf if bad.any() else 0.0 if over <= 0 else over / base if base > 0 else math.inf
        verdict = judge.judge("", dtype, got, exact, plain, derived, k)
        used = math.inf if bad.any() else float(np.max(np.where(err == 0, 0.0, err / derived), initial=0.0))
    return {
        "needed_k": needed,
        "bound_used": used,
        "margin": float(verdict.margin),
        "baseline": base,
        "max_error": float(np.max(np.where(bad, np.inf, err), initial=0.0)),
        "front": None if bad.any() else front(err, derived),
        "worst": verdict.describe(),
    }


def front(err, derived, most=64):
    """[[error, bound], ...]: elements no other element beats on both (a larger error at a smaller
    derived bound). The margin at any k is max(error / (k x baseline + bound)) over these: a model can
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
        case = draw_case(seed, index)
        op = case["op"]
        if ops and op not in ops:
            continue
        exacts, plains, derived = {}, {}, {}
        for dtype in dtypes or DTYPES:
            base = {"index": index, "op": op, "dtype": dtype, **case["shape"]}
            reason = not_applicable(adapter, op, dtype, case["inputs"])
            if reason:
                continue  # not counted: what the adapter cannot run is not a measurement
            inputs = rounded(case["inputs"], dtype)
            given = "float32" if dtype == "float64" else dtype  # float64's inputs are float32's numbers
            started = time.perf_counter()
            if given not in exacts:
                exacts[given] = oracle(op, inputs)
            stand_in = judge.plain_dtype(dtype)
            if (given, stand_in) not in plains:
                plains[(given, stand_in)] = oracle(op, inputs, rounding=stand_in)
            if (given, dtype) not in derived:
                derived[(given, dtype)] = bound(op, inputs, dtype)
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
                if not_applicable(adapter, op, dtype, case["inputs"], output):
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
                    found = declared(name, known, spec, op, output, dtype, case["inputs"])
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
                for op in SWEEP_OPS
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


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m attention_conformance.model_sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every measurement and the summary here")
    parser.add_argument(
        "--model", default=str(judge.MODEL_FILE), help="the model file to judge against (default spec/model.yaml)"
    )
    parser.add_argument("--dtype", action="append", choices=DTYPES, help="only this dtype (repeatable)")
    parser.add_argument("--op", action="append", choices=SWEEP_OPS, help="only this op (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="a line per measurement")
    args = parser.parse_args(argv)

    from attention_conformance import contract

    model = judge.model(args.model)
    adapter = contract.load(args.adapter)
    version = adapter.version() if hasattr(adapter, "version") else "?"
    where = machine.one_line()
    started = time.perf_counter()

    def log(row):
        if args.verbose or row["status"] not in ("within", "skipped"):
            needed = row.get("needed_k", math.nan)
            print(
                f"  #{row['index']} {row['dtype']} {_shape_text(row)}: {row['status']}, needed k {needed:.3g}, "
                f"margin {row.get('margin', math.nan):.3g}"
                + (f" ({row['problem']})" if row.get("problem") else "")
                + (f" [declared by {row['declared_by']}]" if row.get("declared_by") else ""),
                flush=True,
            )

    rows = run(args.adapter, adapter, args.examples, args.seed, model, args.dtype, args.op, log)
    seconds = time.perf_counter() - started
    summary = summarize(rows, model)
    command = (
        f"python -m attention_conformance.model_sweep --adapter {args.adapter} --examples {args.examples} "
        f"--seed {args.seed}"
        + "".join(f" --dtype {d}" for d in args.dtype or ())
        + "".join(f" --op {o}" for o in args.op or ())
    )
    print(f"{args.adapter} ({version}), {args.examples} examples, seed {args.seed}, model {args.model}")
    print(f"machine: {where}; {seconds:.0f} s")
    print(table(summary))
    failures = [r for r in rows if r["status"] in ("beyond", "raised")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "adapter": args.adapter,
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


if __name__ == "__main__":
    sys.exit(main())
