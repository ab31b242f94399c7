"""The failure to read first: of a run's failing tests, the one at the earliest stage of the computation, on the
smallest case. A wrong scale fails `scale()` and every attention after it; the alphabetically first failure is
usually one of the later ones (issue 59: a newcomer's 1/d_k bug headlined a GPT-2 context, its cause 13th of 29).
`run` prints the line at its end; `summary`'s verdict and the page say the same."""

import math

from attention_conformance.contract import ids
from attention_conformance.dtypes import DTYPES

# The computation's stages, first to last: a failure at one explains those after it. An op's outputs sit at the op's
# stage unless _BY_OUTPUT names them (attention() returns its queries, scores and weights beside its context).
STAGES = ("weights drawn", "projection", "rotation", "scores", "scale", "cap", "softmax", "blend", "layer", "training")
_BY_OP = {
    **dict.fromkeys(("create_parameter", "parameters", "draw", "initial_weights", "layer_defaults"), "weights drawn"),
    **dict.fromkeys(("project", "dot_columns"), "projection"),
    **dict.fromkeys(("rotary_embedding", "fused_rotary", "rotary_port"), "rotation"),
    "transposed_matmul": "scores",
    "scale": "scale",
    **dict.fromkeys(("softmax", "dropout"), "softmax"),
    **dict.fromkeys(("gradients", "sgd_step"), "training"),
}
_BY_OUTPUT = {"query": "projection", "key": "projection", "value": "projection", "scores": "scores"}
_BY_OUTPUT |= {"d_k": "scale", "scaled": "scale", "capped": "cap", "weights": "softmax"}
_FAILED = ("failed", "error")
EXPLAIN = "attention-conformance explain FILE.npz (your q, k, v and out; attention-conformance explain --help)"


def stage(op, output):
    """The stage a test's output belongs to: a layer's outputs come after the blend."""
    if op in _BY_OP:
        return _BY_OP[op]
    return _BY_OUTPUT.get(output) or ("layer" if "layer" in op or op.endswith("_module") else "blend")


def dtypes_failing(results, test_id):
    """(the dtypes this test's case and output failed in, the dtypes it ran in), widest first."""
    output, name, _, case_id = ids.parse(test_id)
    ran = {}
    for dtype in DTYPES:
        result = results.get(ids.test_id(output, name, dtype, case_id))
        if result is not None and result["outcome"] in ("passed", *_FAILED):
            ran[dtype] = result["outcome"] in _FAILED
    return [d for d, failed in ran.items() if failed], list(ran)


def pick(results):
    """(test id, its result) of the failure to read first, or None where none failed: the one failing in the largest
    share of the dtypes its case ran in (a convention missed fails in every dtype; a float64 result off by a rounding
    in one: an outside trial's line named the second while two of the first failed), then the earliest stage, the
    fewest elements compared, the widest dtype, the id. A result without its op (a report from before issue 59) sorts
    last at its share."""
    failing = [(t, r) for t, r in results.items() if r["outcome"] in _FAILED]

    def order(item):
        test_id, result = item
        worst = result.get("worst") or {}
        parsed = ids.parse(test_id)
        if parsed is None:
            return 0.0, len(STAGES), math.inf, len(DTYPES), test_id
        failed, ran = dtypes_failing(results, test_id)
        at = STAGES.index(stage(worst["op"], parsed[0])) if "op" in worst else len(STAGES)
        dtype = DTYPES.index(parsed[2]) if parsed[2] in DTYPES else len(DTYPES)
        return -len(failed) / max(len(ran), 1), at, worst.get("elements", math.inf), dtype, test_id

    return min(failing, key=order, default=None)


def ratio(got, expected):
    """'0.5x' where got is a multiple of expected that says something (same sign, not within 0.1%), else ''."""
    if not (expected and got and math.isfinite(got) and math.isfinite(expected)) or (got > 0) != (expected > 0):
        return ""
    times = got / expected
    return "" if abs(times - 1) < 1e-3 else f" ({times:.3g}x)"


def shown(got, expected):
    """The two numbers with as many digits as it takes to tell them apart (6 at least, 17 at most): an outside trial
    read 'got -0.188104 where it should be -0.188104'."""
    digits = 6
    while digits < 17 and f"{got:.{digits}g}" == f"{expected:.{digits}g}" and got != expected:
        digits += 1
    return f"{got:.{digits}g}", f"{expected:.{digits}g}"


def line(results):
    """One line naming the failure to read first and what to do next, or None where nothing failed."""
    found = pick(results)
    if found is None:
        return None
    test_id, result = found
    output, _, dtype, case_id = ids.parse(test_id)
    worst = result.get("worst") or {}
    others = sum(r["outcome"] in _FAILED for r in results.values()) - 1
    where = f"{worst['op']}() output {output!r}, case {case_id!r}, {dtype}" if "op" in worst else test_id
    failed, ran = dtypes_failing(results, test_id)
    if len(ran) > 1:
        where += f" (failing in {len(failed)} of the {len(ran)} dtypes it ran in: {', '.join(failed)})"
    if "got" in worst:
        got, expected = shown(worst["got"], worst["expected"])
        said = (
            f"got {got} where it should be {expected}{ratio(worst['got'], worst['expected'])}"
            f" at element {worst['element']} (the {stage(worst['op'], output)} stage)"
        )
    else:
        said = (result.get("message") or result["outcome"]).splitlines()[0]
    # Where the math has no single answer the case states the spec's choice: a port that made another is not broken
    # there (an outside trial read "root cause ... the softmax stage" of a NaN on a fully masked row as a bug). A call
    # that raised made no choice: no advice to declare one (a trial's crash was told to declare a window's convention).
    convention = worst.get("convention") if "got" in worst else None
    declared = result.get("declared") or {}
    if declared.get("kind") == "convention":  # its other side is declared, and the numbers miss that side too
        convention = None
        said += f", judged on the side its declaration {declared.get('fact')!r} names (it differs there too)"
    # A numeric failure at an early stage is read first, but tests that raised are another bug to fix, not its
    # consequence (an outside trial's root-cause line named a float64 rounding failure while 66 tests had crashed)
    raised = []
    if "got" in worst:
        raised = sorted(
            t for t, r in results.items() if r["outcome"] in _FAILED and (r.get("worst") or {}).get("raised")
        )
        others -= len(raised)
    return (
        f"root cause: {where}: {said}"
        + (
            f"; the case states the spec's conventions.{convention}: if yours is another, declare it "
            "in KNOWN_DIVERGENCES (`attention-conformance docs contract`)"
            if convention
            else ""
        )
        + (f"; {others} other failing test(s) come at this stage or after it" if others else "")
        + (
            f"; {len(raised)} test(s) raised instead of returning, the first {raised[0]}: "
            + (results[raised[0]].get("message") or "raised").splitlines()[0]
            if raised
            else ""
        )
        + f"; to judge your own tensors: {EXPLAIN}"
    )
