"""What `explain` gives a program: `--json`, the verdict with each stage's worst element, its error and its allowance;
`--allowance`, the allowance itself, elementwise (issue 74: a user comparing the suite's allowance with
flash-attention's rule could not read it)."""

import io
import json

import numpy as np

from attention_conformance import writing


def worst(v):
    """A stage's verdict as a program reads it: its worst element, the error there and what the model allows."""
    found = {"index": [int(i) for i in v.index], "got": v.got, "expected": v.expected, "error": v.error}
    found |= {"allowed": v.limit, "derived_bound": v.derived, "plain_error": v.plain_error, "ulps": v.ulps}
    return {"name": v.name, "within": bool(v.within), "margin": v.margin, "worst": found}


def finite(value):
    """JSON has no inf or NaN: they are written as the strings 'inf', '-inf' and 'nan'."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else str(float(value))
    return value


def write_files(record, json_path=None, allowance_path=None):
    """The record to --json's file, its allowances to --allowance's: each whole or not at all (writing.Refused)."""
    if json_path is not None:
        shown = {k: v for k, v in record.items() if k not in ("allowed", "expected")}
        writing.whole(json_path, (json.dumps(finite(shown), indent=1) + "\n").encode(), "--json")
    if allowance_path is not None:
        arrays = {f"allowed_{n}": a for n, a in record["allowed"].items()}
        arrays |= {f"expected_{n}": a for n, a in record["expected"].items()}
        arrays |= {"rows": np.asarray(record["rows"])} if "rows" in record else {}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        writing.whole(allowance_path, buffer.getvalue(), "--allowance")
