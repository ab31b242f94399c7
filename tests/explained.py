"""Helpers for the tests of `explain` (tests/tools/test_explain*.py): a file written and judged in-process."""

import numpy as np

from attention_conformance.tools import explain


def explained(tmp_path, name="case", **arrays):
    """(exit code, every line explain printed) for FILE.npz holding `arrays`."""
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    lines = []
    code = explain.explain(path, out=lines.append, err=lines.append)
    return code, "\n".join(lines)


def qkv_arrays():
    """q [2, 3, 6, 8], k and v [2, 3, 9, 8]: two sentences, three heads, six queries over nine keys, float32."""
    rng = np.random.default_rng(7)
    return tuple(rng.standard_normal(shape).astype(np.float32) for shape in ((2, 3, 6, 8), (2, 3, 9, 8), (2, 3, 9, 8)))
