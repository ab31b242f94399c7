"""`attention-conformance fuzz`: generated cases over the contract's forward ops, judged by the tolerance model.

    attention-conformance fuzz --adapter NAME [--examples N] [--seed S] [--dtype D] [--op OP ...] [--out DIR]

Each op gets --examples drawn cases of its own (default cases.EXAMPLES_PER_OP), searched op by op from the seed, and
the ops where length matters a fifth as many more at a model's lengths (tools/fuzz/lengths.py); a line per op says how
many distinct cases it got, how many outputs were judged and how many excused.

Hypothesis draws cases in the spec's own vocabulary (seeded uniform tensors `{uniform: [low, high],
shape, seed}`, fills, boolean masks, switches and words), so a finding is a spec case. The drawn
cases lean on the places where implementations go wrong: one token (T = 1), odd head sizes, long
sequences, large logits, near ties, masks that hide all keys but one, grouped-head ratios,
decoding offsets, square and cube shapes where a wrong layout still fits. Each output is judged
by attention_conformance.run.tolerance_model (|got - exact| <= k x max|plain - exact| + the bound derived for any
correct computation in the dtype, k from spec/model.yaml). The adapter's NOT_APPLICABLE keys and known divergences are
honoured: a key or divergence naming a spec case covers the generated cases that case stands for
(same op, same words and switches, a decoding offset or not, a fully masked row or not).

A run is deterministic for a seed (hypothesis with a fixed seed, no database, no deadline). On a
finding it shrinks it and writes, under --out (default ./fuzz-findings):
  <adapter>-<op>-<dtype>.yaml   the case, ready to paste under `cases:` in spec/attention.yaml
  <adapter>-<op>-<dtype>.py     a reproducer needing only the framework and NumPy: the adapter's
                                function inlined, the inputs and float64 expectation embedded
Exit codes: 0 no finding, 1 a finding, 2 wrong usage (one line on stderr).
"""

import sys
from pathlib import Path

from attention_conformance import modes
from attention_conformance.cases import loader, plan
from attention_conformance.contract import ids, ops, registry
from attention_conformance.run import tolerance_model
from attention_conformance.tools.fuzz import cases, findings, search

INSTALL = "pip install '/path/to/your/clone/of/attention-conformance[fuzz]', or pip install hypothesis==6.170.15"
DEFAULT_OUT = "fuzz-findings"

# --- the command --------------------------------------------------------------------------------


def _base_name(name):
    """A wrong adapter tests.mutants.<adapter>__<bug> inherits its adapter's known divergences, in its mode."""
    adapter, mode = modes.split(name)
    base = adapter.rsplit(".", 1)[-1].split("__")[0]
    if "__" not in adapter or base not in registry.NAMES:
        return name
    return f"{base}-{mode}" if mode else base


def main(adapter_name, examples=cases.EXAMPLES_PER_OP, seed=0, dtype=None, out=DEFAULT_OUT, chosen=None):
    try:
        import hypothesis  # noqa: F401 - only whether it is installed, before any work
    except ImportError:
        print(f"error: fuzz needs hypothesis: {INSTALL}", file=sys.stderr)
        return 2
    if examples < 1 or seed < 0:
        print("error: --examples must be at least 1 and --seed at least 0", file=sys.stderr)
        return 2
    unknown = [op for op in chosen or () if op not in cases.COVERED]
    if unknown:
        print(
            f"error: --op {unknown[0]} is not a forward op the fuzzer covers ({', '.join(cases.COVERED)})",
            file=sys.stderr,
        )
        return 2
    if Path(out).exists() and not Path(out).is_dir():
        print(f"error: --out {out}: not a directory (a finding's files go into it)", file=sys.stderr)
        return 2

    try:
        adapter = registry.load(adapter_name)
        tolerance_model.model()
    except (registry.AdapterError, tolerance_model.BadInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unmatched = plan.unmatched_not_applicable(loader.load(), adapter)
    if unmatched:  # as `run` refuses it: a typo would silently excuse nothing, or the wrong thing
        print(
            f"error: {adapter_name}'s NOT_APPLICABLE key {unmatched[0]!r} names no dtype, op, case, output or "
            "parameter value of the spec (`attention-conformance check` says more)",
            file=sys.stderr,
        )
        return 2
    dtype = dtype or adapter.DTYPES[0]
    if dtype not in adapter.DTYPES:
        print(
            f"error: {adapter_name} does not declare {dtype} (its DTYPES: {', '.join(adapter.DTYPES)})", file=sys.stderr
        )
        return 2
    judged = search.Fuzzer(adapter_name, adapter, dtype, chosen, _base_name(adapter_name))
    misnamed = ids.misnamed_generated(judged.divergences, ops.OPS)
    if misnamed:
        print(
            f"error: known divergence {ids.declared_key(misnamed[0])!r} (test id {misnamed[0]}) names no op after "
            f"{ids.GENERATED} (a typo?)",
            file=sys.stderr,
        )
        return 2
    if not judged.ops:
        print(
            f"error: {adapter_name} defines none of the ops asked for, or declares them not applicable in {dtype}",
            file=sys.stderr,
        )
        return 2
    finding = judged.run(examples, seed)
    for op, share in judged.by_op.items():
        # Past the draws, cases come from narrowing a finding down ("38 distinct cases of 25 drawn" read as a miscount).
        shrunk = f" ({share.drawn} drawn, the rest narrowing a finding)" if share.cases > share.drawn else ""
        print(
            f"  {op}: {share.cases} distinct cases"
            + (shrunk or f" of {share.drawn} drawn")
            + (f" ({share.long} at a model's lengths)" if share.long and not shrunk else "")
            + f", {share.judged} outputs judged"
            + (f" ({share.at_declared} at a declared precision)" if share.at_declared else "")
            + "".join(f"; {n} excused, {reason[:120]}" for reason, n in share.excused.most_common())
        )
    excused = sum(judged.excused.values())
    summary = (
        f"{adapter_name} {dtype}: {judged.calls} distinct cases over {len(judged.by_op)} of {len(judged.ops)} ops "
        f"(--examples {examples} per op; an op with words draws at least {min(examples, cases.MIN_SHARE)} a word), "
        f"seed {seed}"
        + (
            f", {excused} outputs excused (not applicable, known divergences, or beyond the dtype's range)"
            if excused
            else ""
        )
        + (
            f", {judged.declared_worst[1]} outputs judged at a declared precision (the largest margin "
            f"{judged.declared_worst[0]:.3g}, {judged.declared_worst[2]})"
            if judged.declared_worst[1]
            else ""
        )
    )
    if finding is None and not judged.judged:  # said loudly: a run that judged nothing is no evidence
        print(f"ok: {summary}: no finding, but no output was judged (every one excused, or none drawn)")
        return 0
    if finding is None:
        closest = "" if judged.worst is None else f"; worst margin {judged.worst[0]:.3g} ({judged.worst[1]})"
        blind = [op for op, share in judged.by_op.items() if not share.judged]
        unseen = f"; {len(blind)} of {len(judged.by_op)} ops judged no output (see their lines): {', '.join(blind)}"
        print(f"ok: {summary}: no finding{closest}" + (unseen if blind else ""))
        return 0
    case_id, yaml_path, script_path = findings.write(judged, finding, out, adapter_name, seed)
    print(f"{summary}: stopped at the first finding")
    for output, message in sorted(finding.messages.items()):
        print(f"FINDING {finding.op}/{output}: {message}")
    print(
        f"case {case_id}: {yaml_path}\n"
        f"reproducer: {script_path} ("
        + ("it imports the adapter: from this directory, " if findings.imports_adapter(script_path) else "")
        + f"python {script_path}: exit 1 while it reproduces)"
    )
    print(f"finding: {adapter_name} {finding.op}() in {dtype}, see {yaml_path}", file=sys.stderr)
    return 1
