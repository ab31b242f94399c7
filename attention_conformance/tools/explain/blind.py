"""The query rows `explain` has no answer for: where the model's allowance is wider than the answer itself.

On a long row the derived bound is the worst case of every correct computation's rounding over the row's keys (each
score and weight rounded to the dtype, the sums in any order): in bfloat16 over many thousand keys it is wider than
every value of the output, so that an output of zeros is within there, and so is a wrong K/V head's or a kernel's that
dropped a tile of keys (an outside trial's decode over 131,072 keys, issue 73: allowed 0.086 where the answer is about
0.01; both mistakes passed). "Within" there would say "rounding, not a bug" of anything the size of the answer: such
rows are said, with what to judge instead, and the verdict is no answer (exit NO_ANSWER)."""

import numpy as np

from attention_conformance.run import tolerance_model

NO_ANSWER = 6  # docs/usage.md's table of exit codes
ELEMENTS = 1 << 21  # judged at a time, as the judge does: a Llama-3-8B prefill's output is 2**25


def rows(dtype, exact, plain, derived, k):
    """A bool for each query row (axis -2 of `exact`, [..., T, H]): True where the answer is not all zero and an output
    of zeros would be within at every element of the row, over every head."""
    exact, plain = np.asarray(exact, dtype=np.float64), np.asarray(plain, dtype=np.float64)
    derived = np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape)
    T = exact.shape[-2]
    step = max(1, ELEMENTS // max(exact.size // max(T, 1), 1))
    cuts = [(Ellipsis, slice(start, start + step), slice(None)) for start in range(0, T, step)]
    B = max((tolerance_model.baseline(dtype, exact[at], plain[at]) for at in cuts), default=0.0)
    found, others = np.zeros(T, dtype=bool), tuple(a for a in range(exact.ndim) if a != exact.ndim - 2)
    with np.errstate(invalid="ignore"):  # inf - inf where a key is hidden: never within, so never blind
        for at in cuts:
            allowed = tolerance_model.allowed(dtype, exact[at], plain[at], derived[at], k, B=B)
            zeros_pass = np.all(np.abs(exact[at]) <= allowed, axis=others)
            found[at[1]] = zeros_pass & np.any(exact[at] != 0, axis=others)
    return found


def verdict(dtype, blind, judged, margin, S):
    """The verdict line where some of the `judged` query rows (file indices) are `blind` (rows' bools)."""
    n, first = int(blind.sum()), int(judged[np.argmax(blind)])
    where = f"on every query row judged ({n})" if n == judged.size else f"on {n} of the {judged.size} query rows judged"
    if n < judged.size:
        where += f" (the first, row {first}); the others within (margin {margin:.3g} over every row judged)"
    return (
        f"verdict: no answer {where}: an output of zeros would be within there too, the bound for any correct "
        f"{dtype} computation over up to {S} keys being wider than the answer, so no check tells a bug from rounding "
        "there; judge the same attention computed in float32, where the bound is far tighter (docs/usage.md)"
    )
