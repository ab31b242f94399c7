"""Verdicts per query row: the rows `explain` has no answer for, and the rows beyond.

No answer: on a long row the derived bound is the worst case of every correct computation's rounding over the row's
keys (each score and weight rounded to the dtype, the sums in any order); in bfloat16 over many thousand keys it is
wider than every value of the output, so that an output of zeros is within there, and so is a wrong K/V head's or a
kernel's that dropped a tile of keys (an outside trial's decode over 131,072 keys, issue 73: allowed 0.086 where the
answer is about 0.01; both mistakes passed). "Within" there would say "rounding, not a bug" of anything the size of
the answer: such rows are said, with what to judge instead, and the verdict is no answer (exit NO_ANSWER).

Beyond: the worst element alone hides where a kernel starts to go wrong (row 354 named for a tile skipped from row
300, an outside trial's); the first row beyond points at the tile edge."""

import numpy as np

from attention_conformance.margin import compare
from attention_conformance.run import tolerance_model

NO_ANSWER = 6  # docs/usage.md's table of exit codes
ELEMENTS = 1 << 21  # judged at a time, as the judge does: a Llama-3-8B prefill's output is 2**25


def _each(dtype, exact, plain, derived, k):
    """(rows, exact, allowed) for each piece of ELEMENTS of [..., T, H] arrays, whole query rows, with the whole
    tensor's baseline (k x max|plain - exact| is the tensor's, as the judge's)."""
    exact, plain = np.asarray(exact, dtype=np.float64), np.asarray(plain, dtype=np.float64)
    derived = np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape)
    T = exact.shape[-2]
    step = max(1, ELEMENTS // max(exact.size // max(T, 1), 1))
    cuts = [(Ellipsis, slice(start, start + step), slice(None)) for start in range(0, T, step)]
    B = max((tolerance_model.baseline(dtype, exact[at], plain[at]) for at in cuts), default=0.0)
    with np.errstate(invalid="ignore"):  # inf - inf where a key is hidden: never within
        for at in cuts:
            yield at, exact[at], tolerance_model.allowed(dtype, exact[at], plain[at], derived[at], k, B=B)


def without_answer(dtype, exact, plain, derived, k):
    """A bool for each query row (axis -2 of `exact`, [..., T, H]): True where the answer is not all zero and an output
    of zeros would be within at every element of the row, over every head."""
    found = np.zeros(np.shape(exact)[-2], dtype=bool)
    for at, answer, allowed in _each(dtype, exact, plain, derived, k):
        others = tuple(a for a in range(answer.ndim) if a != answer.ndim - 2)
        found[at[1]] = np.all(np.abs(answer) <= allowed, axis=others) & np.any(answer != 0, axis=others)
    return found


def beyond(dtype, got, exact, plain, derived, k):
    """A bool for each query row of `got` ([..., T, H]): True where some element of the row, in some head, is beyond
    its allowance (margin.compare's rule, a row at a time)."""
    found = np.zeros(np.shape(exact)[-2], dtype=bool)
    for at, answer, allowed in _each(dtype, exact, plain, derived, k):
        mine = np.asarray(got[at], dtype=np.float64)
        for n in range(answer.shape[-2]):
            found[at[1].start + n] = compare(mine[..., n, :], answer[..., n, :], allowed[..., n, :])[0] > 1
    return found


def no_answer(dtype, rows, judged, margin, S):
    """The verdict line where some of the `judged` query rows (file indices) have no answer (`rows`, bools)."""
    n, first = int(rows.sum()), int(judged[np.argmax(rows)])
    where = f"on every query row judged ({n})" if n == judged.size else f"on {n} of the {judged.size} query rows judged"
    if n < judged.size:
        where += f" (the first, row {first}); the others within (margin {margin:.3g} over every row judged)"
    return (
        f"verdict: no answer {where}: an output of zeros would be within there too, the bound for any correct "
        f"{dtype} computation over up to {S} keys being wider than the answer, so no check tells a bug from rounding "
        "there; judge the same attention computed in float32, where the bound is far tighter (docs/usage.md)"
    )


def said_beyond(rows, judged):
    """Where the rows beyond are: how many of the `judged` (file indices), the first and the last; in a sample, the
    row judged before the first, within, so that the start is bounded (a trial read a sample's first as the start)."""
    at, first = judged[rows], int(np.argmax(rows))
    start, before = f"row {at[0]}", int(judged[first - 1]) if first else None
    if before is not None and before != at[0] - 1:
        start += f" (row {before}, judged before it, is within: it starts in rows {before + 1}..{at[0]})"
    return f"beyond on {at.size} of the {judged.size} query rows judged: the first {start}, the last {at[-1]}"
