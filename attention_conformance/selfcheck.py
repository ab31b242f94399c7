"""The adapter self-check: the contract's signatures, then every function called once on tiny inputs.

    attention-conformance check my_adapter

A function that raises, or returns the wrong type, keys, shape or dtype, is named in one line with
what the contract expects; the float64 reference run on the same inputs says what right looks
like. Functions the adapter lists in NOT_APPLICABLE are not called. Nothing here is a conformance
verdict: numbers are compared by `attention-conformance run`.
"""

import numpy as np

from attention_conformance import checks, contract

T, D, HEADS = 3, 4, 2  # tokens, width (d_in = d_out, so both weight layouts have one shape), heads


def tiny_inputs(dtype):
    """One value per contract parameter: small, seeded, in the dtype under test."""
    rng = np.random.default_rng(0)

    def tensor(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32).astype(checks.np_dtype(dtype))

    weights = np.full((T, T), 1 / T, np.float32).astype(checks.np_dtype(dtype))
    return {"x": tensor(T, D), "w": tensor(D, D), "q": tensor(T, D), "k": tensor(T, D), "v": tensor(T, D),
            "scores": tensor(T, T), "weights": weights, "d_k": D, "w_query": tensor(D, D), "w_key": tensor(D, D),
            "w_value": tensor(D, D), "w_out": tensor(D, D), "g": tensor(T, D), "d_in": D, "d_out": D, "seed": 0,
            "form": "v1", "mask": np.triu(np.ones((T, T), bool), k=1), "p": 0.5, "num_heads": HEADS, "causal": True,
            "distribution": "uniform", "n": 64, "lr": 0.1, "row": tensor(D), "batch": tensor(1, T, D),
            "b_query": tensor(D), "b_key": tensor(D), "b_value": tensor(D), "b_out": tensor(D), "layer": "mha",
            "checkpoint": "reference", "start": T - 2, "num_kv_heads": HEADS, "api": "additive", "fill": "neg_inf",
            "batch_mask": np.triu(np.ones((1, T, T), bool), k=1), "padding": np.arange(T)[None, :] >= T - 1}


ROW_INPUT = {"dot_columns"}  # its x is one token's row: "the row on the left, dotted with each column"
BATCH_INPUT = {"attention_module", "layer_mask", "layer_key_padding"}  # layers take [B, T, E] (and a mask [B, T, S])


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _describe(value):
    array = np.asarray(value) if not isinstance(value, (str, bytes, dict, type(None))) else None
    if array is None or array.dtype == object:
        return type(value).__name__
    return f"{array.dtype} {list(array.shape)}"


def _output_problem(name, got, expected, dtype):
    """What is wrong with one output, or None."""
    if got is None or isinstance(got, (str, bytes, dict)):
        return f"output {name!r} is a {type(got).__name__}, should be {_describe(expected)}"
    try:
        array = np.asarray(got)
    except Exception as exc:  # noqa: BLE001 - a ragged list, an object that refuses: the adapter's to fix
        return f"output {name!r} is not an array ({_first_line(exc)})"
    want = np.asarray(expected)
    if array.dtype.kind not in "biuf" and array.dtype.name != "bfloat16":
        return f"output {name!r} has dtype {array.dtype}, should be {_describe(expected)}"
    if array.shape != want.shape:
        return f"output {name!r} has shape {list(array.shape)}, should be {list(want.shape)}"
    if want.dtype.kind == "f" and isinstance(got, np.ndarray) and array.ndim and array.dtype.name != dtype:
        return f"output {name!r} has dtype {array.dtype}, should be {dtype} (the dtype it was given)"
    return None


def problems(module):
    """Every way `module` breaks the contract, one readable line each; [] when it is ready to run."""
    found = contract.contract_problems(module)
    if found:  # calling functions with the wrong parameters would only repeat these
        return found
    from attention_conformance.adapters import reference

    try:
        version = module.version()
        if not isinstance(version, str) or not version.strip():
            found.append(f"version() returned {version!r}, should return a non-empty string like 'torch 2.13.0'")
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the check
        found.append(f"version() raises {_first_line(exc)}")
    devices = getattr(module, "devices", None)
    if devices is not None:
        try:
            seen = devices()
            if not (isinstance(seen, (list, tuple)) and "cpu" in seen and all(isinstance(d, str) for d in seen)):
                found.append(f"devices() returned {seen!r}, should return a list of device names including 'cpu'")
        except Exception as exc:  # noqa: BLE001
            found.append(f"devices() raises {_first_line(exc)}")
    dtype = module.DTYPES[0]
    inputs, reference_inputs = tiny_inputs(dtype), tiny_inputs("float64")
    not_applicable = getattr(module, "NOT_APPLICABLE", {})
    for op, (params, outputs) in contract.OPS.items():
        if op in not_applicable or not hasattr(module, op):  # stated, or an optional op left out
            continue
        call = f"{op}({', '.join(params)})"
        pick = (lambda p: ("row" if op in ROW_INPUT else "batch" if op in BATCH_INPUT else p) if p == "x"
                else "batch_mask" if p == "mask" and op in BATCH_INPUT else p)
        try:
            got = getattr(module, op)(**{p: inputs[pick(p)] for p in params})
        except Exception as exc:  # noqa: BLE001
            found.append(f"{call} raises {_first_line(exc)} (in {dtype}, on tiny inputs)")
            continue
        expected = getattr(reference, op)(**{p: reference_inputs[pick(p)] for p in params})
        if len(outputs) > 1:
            if not isinstance(got, dict) or set(got) != set(outputs):
                keys = sorted(got) if isinstance(got, dict) else type(got).__name__
                found.append(f"{call} returned {keys}, should return a dict with {sorted(outputs)}")
                continue
        else:
            got, expected = {outputs[0]: got}, {outputs[0]: expected}
        for name in outputs:
            problem = _output_problem(name, got[name], expected[name], dtype)
            if problem:
                found.append(f"{call}: {problem}")
    return found
