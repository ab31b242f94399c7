"""The intermediates a FILE.npz gives beside its result (problem.STAGES), told apart for `explain`: a stage
beyond that holds another stage's values (scores already scaled; ONNX's mode-0 qk_matmul_output already capped),
or the softmax's input with a finite fill where a hidden key's -inf is."""

import ml_dtypes
import numpy as np

from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model

# What each [..., T, S] stage holds, in the words its known differences are named with.
HOLDS = dict(
    scores="q k^T before scaling",
    scaled="q k^T x scale",
    capped="the scaled scores soft-capped",
    masked="the softmax's input (capped, biased, -inf where hidden)",
    weights="the softmax's output",
)


def mixed_up(p, verdict, exact, plain, derived, k):
    """['name: meaning'] of the known differences the stage `verdict` judged beyond matches, among the other stages
    of the same attention; none for a stage that is not [..., T, S]."""
    name = verdict.name
    if name not in HOLDS:
        return []
    got = np.asarray(p.arrays[name], dtype=np.float64)
    found = []
    stages = list(HOLDS)
    for i, (other, holds) in enumerate(HOLDS.items()):
        # A stage that leaves its input as it was (no cap, no bias, nothing hidden) is named by that input.
        if other == name or any(np.array_equal(exact[other], exact[s], equal_nan=True) for s in stages[:i] + [name]):
            continue
        if tolerance_model.judge(name, p.dtype, got, exact[other], plain[other], derived[other], k).within:
            if other == "scaled":
                holds = f"q k^T already scaled (x {p.scale if p.scale is not None else 1 / np.sqrt(p.H):.6g})"
            found.append(f"{name} holds {other}: your {name} are {holds}; explain's {name} are {HOLDS[name]}")
    hidden = np.isneginf(exact[name])
    if name == "masked" and hidden.any() and np.isfinite(got[hidden]).all():
        filled = (np.where(hidden, got, a) for a in (exact[name], plain[name]))
        if tolerance_model.judge(name, p.dtype, got, *filled, derived[name], k).within:
            fills = np.unique(got[hidden])
            lowest = float(ml_dtypes.finfo(np_dtype(p.dtype)).min)
            said = f"{p.dtype}'s lowest number" if (fills == lowest).all() else f"{fills.max():.4g} at most"
            found.append(
                f"hidden keys filled with {fills.max():.4g}, not -inf: your softmax's input holds a finite fill "
                f"({said}) where a hidden key's score is -inf; the softmax gives the key 0 all the same, unless its "
                "whole row is hidden"
            )
    return found
