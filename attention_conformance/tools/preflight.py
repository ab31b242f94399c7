"""The `attention-conformance check` command: an adapter's contract signatures, then every function
called once on tiny inputs.

    attention-conformance check my_adapter

A function that raises, or returns the wrong type, keys, shape or dtype, is named in one line with
what the contract expects; the float64 reference run on the same inputs says what right looks
like. Functions the adapter lists in NOT_APPLICABLE are not called. Nothing here is a conformance
verdict: numbers are compared by `attention-conformance run`.
"""

import warnings

import numpy as np

from attention_conformance import dtypes, modes
from attention_conformance.cases import divergences, generated, loader, plan
from attention_conformance.contract import ids, ops, registry

T, D, HEADS = 3, 4, 2  # tokens, width (d_in = d_out, so both weight layouts have one shape), heads
B = 1
_SCALARS = {
    "width": D,
    "heads": HEADS,
    "seed": 0,
    "probability": 0.5,
    "count": 64,
    "rate": 0.1,
    "offset": T - 2,
    "window": 2,  # shorter than the tiny sequence: the band hides a key
    "chunk": 2,  # shorter than the tiny sequence: a query's earlier chunk is hidden
    "floor": 1,  # every position a step: the temperature grows from the first query
    "temperature": 0.1,  # Llama 4's attn_scale
    "reach": 1,  # a key on each side of the tiny sequence's middle queries, the rest hidden
    "rotary": HEADS,  # a head's width (D / HEADS) in attention, a part of the tiny row's in rotary_embedding
    "base": 10000.0,
    "factor": 2.0,
    "position": 7,
    "multiplier": 0.5,
    "cap": 5.0,
    "epsilon": 1e-6,
    "buckets": 8,  # T5's halves: 4 a side, 2 exact; the tiny sequence's distances reach the logarithmic ones
    "distance": 4,
    "switch": True,
}
# A parameter that switches a family on, and its value that switches it off (conventions.softcap: a cap of 0 is none;
# conventions.sinks: a sink of -inf takes nothing). A call whose combination the adapter declares not applicable
# (through a spec case naming it: decoder_mqa_interleaved, a cap and sinks together) is made with one of them off.
_OFF = {"cap": 0.0, "sinks": -np.inf}


def tiny_input(name, kind, form, dtype, rng, choose):
    """One parameter's tiny value for an op whose token tensors come in `form` (ops.FORMS);
    `choose` picks a word for a "choice" parameter."""

    def tensor(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32).astype(dtypes.np_dtype(dtype))

    lead = {"row": (), "unbatched": (T,), "batched": (B, T)}[form]
    if kind == "tokens":
        return tensor(*lead, D)
    if kind == "square":
        weights = np.full(lead + (T,), 1 / T, np.float32).astype(dtypes.np_dtype(dtype))
        return weights if name == "weights" else tensor(*lead, T)
    if kind == "mask":
        return np.broadcast_to(np.triu(np.ones((T, T), bool), k=1), lead[:-1] + (T, T)).copy()
    if kind == "padding":
        return np.broadcast_to(np.arange(T) >= T - 1, (B, T)).copy()
    if kind == "weight":
        return tensor(D, D)
    if kind == "bias":
        return tensor(D)
    if kind == "sink":
        return tensor(HEADS)
    if kind == "table":
        return tensor(_SCALARS["buckets"], HEADS)
    if kind == "offsets":  # two documents in the tiny row: one token, then the rest
        return np.array([0, 1, T], dtype=np.int64)
    if kind == "gain":  # the projection's width; one head's (D / HEADS) where the op norms per head (tiny_inputs)
        return tensor(D)
    if kind in ("choice", "switch"):
        return choose(name)
    return _SCALARS[kind]


def tiny_inputs(op, form, dtype, choose):
    """{parameter: tiny value} for one call of `op`, seeded: the adapter's and the reference's calls see
    the same numbers."""
    rng = np.random.default_rng(0)
    params = ops.OPS[op][0]
    missing = [p for p in params if p not in ops.PARAMETERS]
    if missing:  # the suite's own omission: say so, never blame the adapter
        raise LookupError(
            f"attention-conformance does not describe parameter(s) {', '.join(missing)} in ops.PARAMETERS "
            "(a bug in the suite, not in your adapter: please report it)"
        )
    inputs = {p: tiny_input(p, ops.PARAMETERS[p], form, dtype, rng, choose) for p in params}
    if "rope_type" in inputs:  # NTK's exponent R / (R - 2) needs R > 2: the tiny row's whole width
        inputs["rotary_dim"] = D
    if inputs.get("per_head"):  # a per-head norm's weight is one head wide
        inputs |= {p: v[: D // HEADS] for p, v in inputs.items() if ops.PARAMETERS[p] == "gain"}
    return inputs


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


def problems(module, adapter_name=None, said=None):
    """Every way `module` (the adapter `adapter_name`, by default its module's last name) breaks the
    contract, one readable line each; [] when it is ready to run. `said` (a list) gets a line for each call made
    otherwise than on the first tiny inputs because the adapter declares their combination not applicable."""
    adapter_name = adapter_name or module.__name__.rsplit(".", 1)[-1]
    found = registry.contract_problems(module)
    if found:  # calling functions with the wrong parameters would only repeat these
        return found
    spec = loader.load()
    found += [
        f"NOT_APPLICABLE key {key!r} names no dtype, op, case, output or input value of the spec (a typo?)"
        for key in plan.unmatched_not_applicable(spec, module)
    ]
    mode = getattr(module, "MODE", None) or next(iter(modes.declared(module)))
    keys = {ids.declared_pattern(adapter_name, key): key for key, _ in divergences.own_entries(module, mode)}
    found += [
        f"KNOWN_DIVERGENCES key {keys[p]!r} names no op after {ids.GENERATED} (a typo?)"
        for p in ids.misnamed_generated(keys, ops.OPS)
    ]

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
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the check
            found.append(f"devices() raises {_first_line(exc)}")
    not_applicable = getattr(module, "NOT_APPLICABLE", {})
    primary = module.DTYPES[0]
    # Each op in every dtype the adapter declares where the spec runs it there (a half-precision path
    # that raises is found here, not halfway through a run); the first dtype, every op.
    try:
        declared = divergences.declared(adapter_name, module)
    except loader.SpecError as exc:  # a KNOWN_DIVERGENCES entry's field: the message names it
        return found + [str(exc)]
    planned = {
        (test.case.op, test.dtype)
        for test in plan.tests(spec, {adapter_name: module})
        if not test.not_applicable and not divergences.reason_for(test.id, declared)
    }  # a path the spec runs and the adapter has not declared divergent (JAX float16 layers raise: declared)

    def choose(name):  # the first word (or switch value) the adapter has not declared not applicable ("layer=mha")
        words = ops.CHOICES.get(name, (_SCALARS["switch"], not _SCALARS["switch"]))
        return next((w for w in words if ids.parameter_key(name, w) not in not_applicable), None)

    for op, (params, _outputs) in ops.OPS.items():
        if op in not_applicable or not hasattr(module, op):  # stated, or an optional op left out
            continue
        if any(ops.PARAMETERS.get(p) in ("choice", "switch") and choose(p) is None for p in params):
            continue  # every value of a parameter declared not applicable: the op cannot be called
        if any(
            ids.parameter_key(p, _SCALARS[ops.PARAMETERS[p]]) in not_applicable
            for p in params
            if ops.PARAMETERS.get(p) in ("width", "heads", "count", "offset")
        ):
            continue  # the tiny size itself is declared not applicable ("num_heads=2"): nothing to call it with
        for dtype in module.DTYPES:
            if dtype in not_applicable or dtype != primary and (op, dtype) not in planned:
                continue
            problems_here = []
            for form in ops.FORMS.get(op, ("unbatched",)):
                problems_here = []
                for off in _combinations(module, spec, op, form, dtype, choose, said if dtype == primary else None):
                    problems_here += _call_problems(module, op, form, dtype, choose, off)
                found += problems_here
                if problems_here:  # the other form would mostly repeat them
                    break
            if problems_here:  # the other dtypes would mostly repeat them
                break
    return found


def _switched_off(inputs, off):
    """The tiny inputs with the parameters in `off` switched off (_OFF), in their own dtype and shape."""
    return inputs | {p: np.full_like(inputs[p], _OFF[p]) if np.ndim(inputs[p]) else _OFF[p] for p in off}


def _combinations(module, spec, op, form, dtype, choose, said):
    """The parameters to switch off for each call of `op`: () alone, unless the adapter declares the tiny inputs'
    combination not applicable through a spec case it stands with (generated.declaring, as fuzz reads a declaration);
    then each one switched off whose call it does not declare, and a line in `said` for the user."""
    try:
        inputs = tiny_inputs(op, form, dtype, choose)
    except LookupError:
        return [()]  # _call_problems says what is missing

    def declared(off):
        changed = _switched_off(inputs, off)
        twins = generated.declaring(spec, op, changed)
        reasons = {generated.not_applicable(module, twins, op, changed, dtype, o) for o in ops.OPS[op][1]}
        return None if None in reasons else [t.id for t in twins]

    by_case = declared(())
    if by_case is None:
        return [()]
    on = [p for p in _OFF if p in inputs and any(generated.features(op, {p: inputs[p]}).values())]
    calls = [(p,) for p in on if declared((p,)) is None]
    if said is not None:
        made = ", and ".join(f"with {p} off" for (p,) in calls)
        line = (
            f"{op}() with {' and '.join(on) or 'these inputs'} set together: not called, declared not applicable "
            f"(case {', '.join(by_case)}); " + (f"called {made}" if made else "nothing to switch off: not checked")
        )
        if line not in said:  # an op of two forms would say it twice
            said.append(line)
    return calls


def _call_problems(module, op, form, dtype, choose, off=()):
    """What is wrong with one call of `op` on tiny inputs in one form (the parameters in `off` switched off),
    against the reference's call."""
    from attention_conformance.adapters import reference

    params, outputs = ops.OPS[op]
    not_applicable = getattr(module, "NOT_APPLICABLE", {})
    try:
        inputs = _switched_off(tiny_inputs(op, form, dtype, choose), off)
        reference_inputs = _switched_off(tiny_inputs(op, form, "float64", choose), off)
    except LookupError as exc:
        return [str(exc)]
    shown = ", ".join(f"{p}={inputs[p]!r}" if ops.PARAMETERS[p] in ("choice", "switch") else p for p in params)
    shown += "".join(f", {p} off" for p in off)
    call = f"{op}({shown})" + (f" with {form} inputs" if len(ops.FORMS.get(op, ())) > 1 else "")
    try:
        with warnings.catch_warnings():  # as `run` calls it (pytest -W error): a warning there fails its test
            warnings.simplefilter("error")
            got = getattr(module, op)(**inputs)
    except Warning as exc:
        return [f"{call} warns {_first_line(exc)} (in {dtype}, on tiny inputs): `run` fails a test on a warning"]
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the check
        return [f"{call} raises {_first_line(exc)} (in {dtype}, on tiny inputs)"]
    try:
        expected = getattr(reference, op)(**reference_inputs)
    except Exception as exc:  # noqa: BLE001 - the oracle's failure is the suite's, and said to be
        return [
            f"{call}: the reference adapter raises {_first_line(exc)} on the same inputs "
            "(a bug in attention-conformance, not in your adapter: please report it)"
        ]
    if len(outputs) > 1:
        required = {o for o in outputs if f"{op}/{o}" not in not_applicable}  # a declared one may be left out
        if not isinstance(got, dict) or not required <= set(got) <= set(outputs):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            return [f"{call} returned {keys}, should return a dict with {sorted(outputs)}"]
    else:
        got, expected = {outputs[0]: got}, {outputs[0]: expected}
    found = []
    for name in outputs:
        if f"{op}/{name}" in not_applicable:  # declared: the value is not read, so it may be absent or anything
            continue
        problem = _output_problem(name, got[name], expected[name], dtype)
        if problem:
            found.append(f"{call}: {problem}")
    return found
