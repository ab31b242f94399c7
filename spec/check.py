"""Running one case on one adapter, and the one comparison helper every check goes through."""

import numpy as np

from spec import OPS


class Nonconformance(AssertionError):
    pass


_outputs = {}  # (adapter, case id, dtype, goldens) -> outputs: every quantity of a case shares one call


def _resolve(value, dtype, goldens):
    """An input as the adapter receives it. Tensor data is float32, as the documents' tensors are
    (golden inputs are stored so), then cast to the dtype under test: every dtype sees the same numbers."""
    if isinstance(value, str) and "#" in value:
        data = goldens.tensor(value)
    elif isinstance(value, dict) and "fill" in value:
        data = np.full(value["shape"], value["fill"])
    elif isinstance(value, dict):  # PCG64 streams are stable across NumPy versions and machines
        low, high = value["uniform"]
        data = np.random.default_rng(value["seed"]).uniform(low, high, value["shape"])
    elif isinstance(value, list) and np.asarray(value).dtype == bool:
        return np.asarray(value)
    elif isinstance(value, (int, float, str, bool)):
        return value  # sizes, seeds, d_k, the learning rate and switches stay Python scalars; 'v1' stays a word
    else:
        data = np.array(value)
    return np.asarray(data, dtype=np.float32).astype(dtype)


def outputs(adapter_name, adapter, case, dtype, goldens, input_dtype=None):
    """The adapter's outputs for a case; input_dtype lets the reference run on the tested inputs."""
    key = (adapter_name, case.id, dtype, input_dtype, id(goldens))
    if key not in _outputs:
        kwargs = {name: _resolve(value, input_dtype or dtype, goldens) for name, value in case.inputs.items()}
        result = getattr(adapter, case.op)(**kwargs)
        names = OPS[case.op]
        if len(names) == 1:
            result = {names[0]: result}
        elif not isinstance(result, dict) or set(result) != set(names):
            got = sorted(result) if isinstance(result, dict) else type(result).__name__
            raise Nonconformance(f"{adapter_name} {case.op}() returned {got}, should return a dict with {sorted(names)}")
        _outputs[key] = result
    return _outputs[key]


def ulps(got, expected, dtype):
    """Distance in units of the last place of `dtype` at the expected value."""
    if dtype not in ("float16", "float32", "float64"):
        return None
    exp = np.asarray(expected, dtype=np.float64).astype(dtype)
    return float(np.abs(np.asarray(got, dtype=np.float64) - exp) / np.spacing(np.abs(exp)))


def max_ulps(got, expected, dtype):
    """Largest |error| in ULPs of `dtype` at the tensor's largest expected magnitude.

    Per-element ULPs explode where an output is a near-cancellation (an entry of 1e-8 whose
    terms were O(1)); the tensor's own scale is the honest unit for the summary.
    """
    if dtype not in ("float16", "float32", "float64") or np.size(got) == 0:
        return 0.0
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(np.asarray(got, dtype=np.float64) - expected)
    unit = np.spacing(np.asarray(np.abs(expected).max(), dtype=dtype)).astype(np.float64)
    return float(err.max() / unit)


def compare(got, expected, atol, rtol):
    """(margin, worst index, error, allowed): margin is worst |error| / allowed, > 1 fails."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(got - expected)
    allowed = atol + rtol * np.abs(expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / allowed)
    ratio = np.where(np.isnan(got), np.inf, ratio)  # NaN never conforms
    worst = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.ndim else ()
    return float(ratio[worst]), worst, float(err[worst]), float(allowed[worst])


def _fail(label, message):
    raise Nonconformance(f"{label}: {message}")


def evaluate(spec, adapter_name, adapter, case, output, dtype, goldens):
    """Check one output of one case; return (margin, worst ULP): margin 0 = exact, 1 = whole budget.

    The margin counts computed expectations only: against a printed number it mostly measures
    how close the true value sits to the document's rounding boundary, the same for everyone.

    Raises Nonconformance with a one-paragraph message naming the framework, dtype, case,
    output, worst element, got vs expected, the error against its tolerance and its origin.
    """
    exp = case.expect[output]
    label = f"{adapter_name} {dtype}, case {case.id!r}, output {output!r}"
    results = outputs(adapter_name, adapter, case, dtype, goldens)
    got = results[output]
    if exp.shape is not None and list(np.shape(got)) != exp.shape:
        _fail(label, f"shape {list(np.shape(got))} but should be {exp.shape} ({_origin(spec, exp)})")
    if exp.row is not None:
        got = np.asarray(got)[exp.row]
    if exp.check_dtype and str(np.asarray(got).dtype) != dtype:
        _fail(label, f"dtype {np.asarray(got).dtype} but should be {dtype}")
    if exp.in_range is not None:
        low, high = exp.in_range
        values = np.asarray(got, dtype=np.float64)
        if values.size == 0 or values.min() < low or values.max() >= high:
            _fail(label, f"values span [{float(values.min())!r}, {float(values.max())!r}] but should lie in [{low}, {high})")
    if exp.upper_triangle_zero:
        values = np.asarray(got)
        above = np.triu(np.ones(values.shape[-2:], dtype=bool), k=1)
        leaked = np.argwhere((values != 0) & above)
        if leaked.size:
            i = tuple(int(n) for n in leaked[0])
            _fail(label, f"element {list(i)} above the diagonal is {float(values[i])!r}: a query sees a later key")
    if exp.zero_fraction is not None:
        zf = exp.zero_fraction
        fraction = float(np.mean(np.asarray(got) == 0))
        if abs(fraction - zf["value"]) > zf["bound"]:
            _fail(label, f"{fraction:.5f} of the elements are zero but should be {zf['value']} +- {zf['bound']} ({zf['reason']})")
    if exp.mean is not None:
        stat = exp.mean
        mean = float(np.mean(np.asarray(got, dtype=np.float64)))
        if abs(mean - stat["value"]) > stat["bound"]:
            _fail(label, f"mean {mean!r} but should be {stat['value']} +- {stat['bound']} ({stat['reason']})")
    if exp.min_below is not None and not float(np.min(got)) < exp.min_below:
        _fail(label, f"smallest value {float(np.min(got))!r} but some value should be below {exp.min_below}")
    if exp.equals is not None:
        if np.shape(got) != np.shape(exp.equals) or not np.array_equal(np.asarray(got), np.asarray(exp.equals)):
            _fail(label, f"got {_show(got)} but should be exactly {exp.equals!r} ({_origin(spec, exp)})")

    margin, worst_ulp = 0.0, 0.0
    tol = spec.tolerances[exp.tolerance] if exp.tolerance else None
    targets = []
    if exp.printed is not None:
        atol, rtol = tol.bounds(dtype)
        # The document rounded a float32 result to `decimals`: allow half a unit of that place,
        # plus the dtype's own tolerance for how far any framework's float32 may sit from it.
        half_unit = 0.5 * 10.0 ** -exp.decimals
        targets.append((exp.printed, half_unit + atol, rtol, f"printed to {exp.decimals} decimals + '{tol.name}'", _origin(spec, exp), False))
    if exp.golden is not None:
        atol, rtol = tol.bounds(dtype)
        targets.append((goldens.tensor(exp.golden), atol, rtol, f"'{tol.name}'", f"golden {exp.golden}", True))
    if exp.reference:
        # Too big to store: the oracle computes it now, in float64, from the very inputs under test.
        from adapters import reference

        expected = outputs("reference", reference, case, "float64", goldens, input_dtype=dtype)[output]
        atol, rtol = tol.bounds(dtype)
        targets.append((expected if exp.row is None else np.asarray(expected)[exp.row], atol, rtol,
                        f"'{tol.name}'", "adapters/reference.py on the same inputs", True))
    if exp.same_as is not None:
        atol, rtol = tol.bounds(dtype)
        other = results[exp.same_as]
        targets.append((other if exp.row is None else np.asarray(other)[exp.row], atol, rtol, f"'{tol.name}'", f"the same call's {exp.same_as!r}", True))
    for expected, atol, rtol, tol_text, origin, counts in targets:
        if np.shape(got) != np.shape(expected):
            _fail(label, f"shape {list(np.shape(got))} but should be {list(np.shape(expected))} ({origin})")
        m, index, err, allowed = compare(got, expected, atol, rtol)
        if m > 1:
            where = list((exp.row,) + tuple(int(i) for i in index)) if exp.row is not None else [int(i) for i in index]
            g, e = np.asarray(got)[index], np.asarray(expected, dtype=np.float64)[index]
            ulp = ulps(g, e, dtype)
            ulp_text = f", {ulp:.3g} ULP" if ulp is not None else ""
            _fail(label, f"worst element {where}: got {float(g)!r} but should be {float(e)!r} "
                         f"(|error| {err:.3g} > allowed {allowed:.3g} from tolerance {tol_text}{ulp_text}); "
                         f"expected value: {origin}")
        if counts:
            margin = max(margin, m)
            worst_ulp = max(worst_ulp, max_ulps(got, expected, dtype))
    if exp.differs_from is not None:
        atol, rtol = tol.bounds(dtype)
        if compare(got, results[exp.differs_from], atol, rtol)[0] <= 1:
            _fail(label, f"matches the same call's {exp.differs_from!r} within tolerance '{tol.name}', but the two should differ")
    if exp.nonzero_values is not None:
        atol, rtol = tol.bounds(dtype)
        values = np.asarray(got)
        kept = values[values != 0]
        m, index, err, allowed = compare(kept, np.full_like(kept, exp.nonzero_values, dtype=np.float64), atol, rtol)
        if kept.size == 0 or m > 1:
            _fail(label, f"a kept element is {float(kept[index]) if kept.size else None!r} but every kept element "
                         f"should be {exp.nonzero_values!r} (|error| {err:.3g} > allowed {allowed:.3g})")
        margin = max(margin, m)
    if exp.row_sums is not None:
        atol, rtol = tol.bounds(dtype)
        sums = np.asarray(got, dtype=np.float64).sum(axis=-1)
        m, index, err, allowed = compare(sums, np.full_like(sums, exp.row_sums), atol, rtol)
        if m > 1:
            _fail(label, f"row {[int(i) for i in index]} sums to {float(sums[index])!r} but should sum to {exp.row_sums} "
                         f"(|error| {err:.3g} > allowed {allowed:.3g} from tolerance '{tol.name}')")
        margin = max(margin, m)
    return margin, worst_ulp


def _show(value):
    return repr(value.tolist() if isinstance(value, np.ndarray) else value)


def _origin(spec, exp):
    if not exp.source:
        return "no document source"
    return f"{spec.documents[exp.source['doc']]}: {exp.source['quote'].strip()!r}"


def run_all(spec, adapter_name, adapter, goldens):
    """{test id: (outcome, message)} for the whole spec on one adapter, outside pytest.

    For checking the checker: a deliberately wrong adapter must produce "failed" somewhere.
    An exception from the adapter counts as "error", which would also fail its test.
    """
    results = {}
    for dtype in adapter.DTYPES:
        for case in spec.cases.values():
            for output in case.expect:
                test_id = f"test_{output}[{adapter_name}-{dtype}-{case.id}]"
                try:
                    evaluate(spec, adapter_name, adapter, case, output, dtype, goldens)
                    results[test_id] = ("passed", "")
                except Nonconformance as exc:
                    results[test_id] = ("failed", str(exc))
                except Exception as exc:  # noqa: BLE001 - any crash is a caught bug, and is reported as one
                    results[test_id] = ("error", f"{type(exc).__name__}: {exc}")
    return results
