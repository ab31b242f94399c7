"""The adapter registry and contract.

An adapter is one module in this folder named after its framework (``adapters/jax.py``)
or any importable module given by dotted path. It exposes the functions in ``CONTRACT``
with exactly these parameter names, takes and returns NumPy arrays, and declares the
dtypes it computes in as ``DTYPES``. The registry is the list of files here, so adding a
framework is adding a file: tests, tox and the summary all read ``NAMES``.

Importing this package imports no framework; ``load`` does, for the one adapter asked for.
"""

import importlib
import inspect
from pathlib import Path

NAMES = tuple(sorted(p.stem for p in Path(__file__).parent.glob("*.py") if not p.stem.startswith("_")))

# name -> parameter names. The first group mirrors the rows of the PyTorch-to-TF mapping
# table in 004_616018589080e108.txt; then the pipeline, the two module forms, masks (True =
# hidden), dropout, heads, and training (gradients of L = sum(context * g), one SGD step).
CONTRACT = {
    "version": (),
    "create_parameter": ("d_in", "d_out", "seed"),
    "project": ("x", "w"),
    "transposed_matmul": ("q", "k"),
    "scale": ("scores", "d_k"),
    "softmax": ("scores",),
    "blend": ("weights", "v"),
    "dot_columns": ("x", "w"),
    "attention": ("x", "w_query", "w_key", "w_value"),
    "self_attention_v1": ("x", "w_query", "w_key", "w_value"),
    "self_attention_v2": ("x", "w_query", "w_key", "w_value"),
    "exercise_3_1": ("x", "w_query", "w_key", "w_value"),
    "parameters": ("d_in", "d_out", "form"),
    "causal_attention": ("x", "w_query", "w_key", "w_value"),
    "masked_attention": ("x", "w_query", "w_key", "w_value", "mask"),
    "dropout": ("weights", "p", "seed"),
    "multi_head_attention": ("x", "w_query", "w_key", "w_value", "w_out", "num_heads", "causal"),
    "fused_attention": ("x", "w_query", "w_key", "w_value", "num_heads", "causal"),
    "attention_layer": ("x", "w_query", "w_key", "w_value"),
    "draw": ("distribution", "n", "seed"),
    "initial_weights": ("d_in", "d_out", "form", "seed"),
    "knobs_removed": ("x",),
    "gradients": ("x", "w_query", "w_key", "w_value", "g", "form"),
    "sgd_step": ("x", "w_query", "w_key", "w_value", "g", "lr"),
}


class AdapterError(Exception):
    pass


ENTRY_POINT_GROUP = "attention_conformance.adapters"


def module_path(name):
    """The module to import for an adapter name: a file here, an installed package's entry point
    in the group attention_conformance.adapters, or the name itself as a dotted module path."""
    if name in NAMES:
        return f"adapters.{name}"
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return entry.value
    return name


def contract_problems(module):
    """Every way ``module`` breaks the contract, one readable line each."""
    problems = []
    dtypes = getattr(module, "DTYPES", None)
    if not (isinstance(dtypes, tuple) and dtypes and all(isinstance(d, str) for d in dtypes)):
        problems.append("DTYPES must be a non-empty tuple of dtype names, e.g. ('float32',)")
    for fn_name, params in CONTRACT.items():
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            problems.append(f"missing function {fn_name}({', '.join(params)})")
            continue
        got = tuple(inspect.signature(fn).parameters)
        if got != params:
            problems.append(f"{fn_name}({', '.join(got)}) should be {fn_name}({', '.join(params)})")
    return problems


def load(name):
    """Import one adapter, check its contract and pin the numeric switches of what it imported."""
    from adapters import _numerics

    try:
        module = importlib.import_module(module_path(name))
    except Exception as exc:  # a requested framework that does not import is a failure, never a skip
        raise AdapterError(f"adapter {name!r} was requested but does not import: {type(exc).__name__}: {exc}") from exc
    problems = contract_problems(module)
    if problems:
        raise AdapterError(f"adapter {name!r} breaks the contract: " + "; ".join(problems))
    _numerics.pin()
    return module
