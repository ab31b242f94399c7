"""Helpers for the tests of `explain` (tests/tools/explain/): a file written and judged in-process."""

import numpy as np

from attention_conformance.tools.explain import command


def explained(tmp_path, name="case", **arrays):
    """(exit code, every line explain printed) for FILE.npz holding `arrays`."""
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    lines = []
    code = command.explain(path, out=lines.append, err=lines.append)
    return code, "\n".join(lines)


def qkv_arrays():
    """q [2, 3, 6, 8], k and v [2, 3, 9, 8]: two sentences, three heads, six queries over nine keys, float32."""
    rng = np.random.default_rng(7)
    return tuple(rng.standard_normal(shape).astype(np.float32) for shape in ((2, 3, 6, 8), (2, 3, 9, 8), (2, 3, 9, 8)))


def float32_stages(q, k, v, hidden, cap=None, bias=None, bias_first=False):
    """Attention in float32 as a kernel writes it, every stage kept: scaled, capped, masked (-inf where hidden),
    weights, out. `bias_first` adds the bias before the cap."""
    scaled = q @ np.swapaxes(k, -1, -2) * np.float32(1 / np.sqrt(q.shape[-1]))
    capped = scaled + bias if bias is not None and bias_first else scaled
    if cap:
        capped = np.tanh(capped / np.float32(cap)) * np.float32(cap)
    logits = capped + bias if bias is not None and not bias_first else capped
    masked = np.where(hidden, np.float32(-np.inf), logits).astype(np.float32)
    row_max = masked.max(axis=-1, keepdims=True)
    e = np.exp(masked - np.where(np.isneginf(row_max), 0, row_max))
    total = e.sum(axis=-1, keepdims=True)
    weights = (e / np.where(total == 0, 1, total)).astype(np.float32)
    found = dict(scaled=scaled, capped=capped, masked=masked, weights=weights, out=weights @ v)
    return {name: np.asarray(a, np.float32) for name, a in found.items()}
