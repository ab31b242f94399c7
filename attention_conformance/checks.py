"""Running one case on one adapter, and the one comparison helper every check goes through."""

import collections
import warnings

import numpy as np

from attention_conformance import plan
from attention_conformance.contract import LOW_PRECISION, OPS


class Nonconformance(AssertionError):
    pass


# (adapter, case id, dtype, ...) -> outputs: every output of a case shares one call. Bounded:
# pytest runs a case's tests together (conftest sorts them), and a GPT-2-sized case's outputs in
# four dtypes would otherwise stay in memory for the whole session.
_outputs = collections.OrderedDict()
_KEEP = 8


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
    return np.asarray(data, dtype=np.float32).astype(np_dtype(dtype))


def outputs(adapter_name, adapter, case, dtype, goldens, input_dtype=None, rounding=None):
    """The adapter's outputs for a case; input_dtype lets the reference run on the tested inputs,
    and `rounding` keys the reference's rounded-at-every-step run apart from its exact one."""
    key = (adapter_name, case.id, dtype, input_dtype, rounding, id(goldens))
    if key not in _outputs:
        kwargs = {name: _resolve(value, input_dtype or dtype, goldens) for name, value in case.inputs.items()}
        result = getattr(adapter, case.op)(**kwargs)
        names = OPS[case.op][1]
        if len(names) == 1:
            result = {names[0]: result}
        elif not isinstance(result, dict) or set(result) != set(names):
            got = sorted(result) if isinstance(result, dict) else type(result).__name__
            raise Nonconformance(f"{adapter_name} {case.op}() returned {got}, should return a dict with {sorted(names)}")
        _outputs[key] = result
        while len(_outputs) > _KEEP:
            _outputs.popitem(last=False)
    _outputs.move_to_end(key)
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


def compare(got, expected, allowed):
    """(margin, worst index, error, allowed): margin is worst |error| / allowed, > 1 fails."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(got - expected)
    if err.size == 0:
        return 0.0, (0,) * err.ndim, 0.0, 0.0
    allowed = np.broadcast_to(np.asarray(allowed, dtype=np.float64), err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / allowed)
    ratio = np.where(np.isnan(got), np.inf, ratio)  # NaN never conforms
    worst = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.ndim else ()
    return float(ratio[worst]), worst, float(err[worst]), float(allowed[worst])


def np_dtype(name):
    """NumPy's dtype for a spec dtype name; bfloat16 comes from ml_dtypes, as in JAX and TF."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def allowed_error(spec, tol, dtype, expected, plain=None):
    """What |got - expected| may be, elementwise.

    float32 and float64: atol + rtol x |expected|, from the named tolerance. float16 and
    bfloat16 (unless the tolerance is exact): k x max|plain - expected| + ulps x ULP(expected),
    where `plain` is the same computation done plainly in that dtype (spec: low_precision). The
    baseline is the tensor's worst plain error: elementwise, a plain result that happens to round
    exactly would demand exactness of everyone else.
    """
    expected = np.asarray(expected, dtype=np.float64)
    if dtype in LOW_PRECISION and tol.name != "exact":
        k, n_ulps = spec.tolerances["low_precision"].bounds(dtype)
        unit = np.spacing(np.abs(expected).astype(np_dtype(dtype))).astype(np.float64)
        baseline = np.abs(np.asarray(plain, dtype=np.float64) - expected).max(initial=0.0)
        return k * baseline + n_ulps * unit
    atol, rtol = tol.bounds(dtype)
    return atol + rtol * np.abs(expected)


def _fail(label, message):
    raise Nonconformance(f"{label}: {message}")


def _as_numbers(label, value):
    """An adapter's output as an array of real numbers, or the Nonconformance that says what it was
    instead: however wrong an output is, it must never crash the suite's own code."""
    if value is None or isinstance(value, (str, bytes, dict)):
        _fail(label, f"returned {type(value).__name__} {_show(value)[:80]}, but should return an array of numbers")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - ragged lists, objects that refuse conversion: all the adapter's doing
        _fail(label, f"returned a {type(value).__name__} that is not an array of numbers ({type(exc).__name__}: {exc})")
    if array.dtype.kind not in "biuf" and array.dtype.name != "bfloat16":
        _fail(label, f"returned an array of dtype {array.dtype}, but should return real numbers")
    return array


def evaluate(spec, adapter_name, adapter, case, output, dtype, goldens):
    """Check one output of one case; return (margin, worst ULP): margin 0 = exact, 1 = whole budget.

    The margin counts computed expectations only: against a printed number it mostly measures
    how close the true value sits to the document's rounding boundary, the same for everyone.

    Raises Nonconformance with a one-paragraph message naming the framework, dtype, case,
    output, worst element, got vs expected, the error against its tolerance and its origin.
    """
    __tracebackhide__ = True
    with np.errstate(all="ignore"):  # overflow or 0/0 in a wrong output is the adapter's failure, reported as such
        return _evaluate(spec, adapter_name, adapter, case, output, dtype, goldens)


def _evaluate(spec, adapter_name, adapter, case, output, dtype, goldens):
    __tracebackhide__ = True
    exp = case.expect[output]
    label = f"{adapter_name} {dtype}, case {case.id!r}, output {output!r}"
    results = outputs(adapter_name, adapter, case, dtype, goldens)
    got = _as_numbers(label, results[output])
    if exp.shape is not None and list(got.shape) != exp.shape:
        _fail(label, f"shape {list(got.shape)} but should be {exp.shape} ({_origin(spec, exp)})")
    if exp.row is not None:
        if got.ndim == 0 or exp.row >= got.shape[0]:
            _fail(label, f"shape {list(got.shape)} has no row {exp.row}")
        got = got[exp.row]
    if got.size == 0 and (exp.in_range or exp.zero_fraction or exp.mean or exp.min_below is not None or exp.nonzero_values is not None):
        _fail(label, f"shape {list(got.shape)} has no elements")
    if exp.check_dtype and str(np.asarray(got).dtype) != dtype:
        _fail(label, f"dtype {np.asarray(got).dtype} but should be {dtype}")
    if exp.in_range is not None:
        low, high = exp.in_range
        values = np.asarray(got, dtype=np.float64)
        if values.size == 0 or not (low <= values.min() and values.max() < high):  # NaN fails too
            _fail(label, f"values span [{float(values.min())!r}, {float(values.max())!r}] but should lie in [{low}, {high})")
    if exp.upper_triangle_zero:
        values = np.asarray(got)
        if values.ndim < 2:
            _fail(label, f"shape {list(values.shape)} has no rows and columns of weights")
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
        if not abs(mean - stat["value"]) <= stat["bound"]:  # NaN fails too
            _fail(label, f"mean {mean!r} but should be {stat['value']} +- {stat['bound']} ({stat['reason']})")
    if exp.min_below is not None and not float(np.min(got)) < exp.min_below:
        _fail(label, f"smallest value {float(np.min(got))!r} but some value should be below {exp.min_below}")
    if exp.equals is not None:
        if np.shape(got) != np.shape(exp.equals) or not np.array_equal(np.asarray(got), np.asarray(exp.equals)):
            _fail(label, f"got {_show(got)} but should be exactly {exp.equals!r} ({_origin(spec, exp)})")

    margin, worst_ulp = 0.0, 0.0
    tol = spec.tolerances[exp.tolerance] if exp.tolerance else None
    low = dtype in LOW_PRECISION
    reference_out = plain_out = None
    if exp.reference or (low and tol is not None):
        # The oracle on the very inputs under test: needed when the expected value is too big to
        # store, and in half precision, where the inputs themselves were rounded (golden values
        # are computed from float32 inputs). There, `plain` is the same computation rounded to
        # the dtype after every step: the error a careful computation in that dtype makes.
        from attention_conformance.adapters import reference

        reference_out = _select(outputs("reference", reference, case, "float64", goldens, input_dtype=dtype)[output], exp.row)
        if low:
            with reference.rounding_to(np_dtype(dtype)):
                plain = outputs("reference", reference, case, "float64", goldens, input_dtype=dtype, rounding=dtype)[output]
            plain_out = _select(np.asarray(plain).astype(np_dtype(dtype)), exp.row)  # the result is stored in the dtype too
    targets = []  # (expected, allowed, tolerance text, origin, counts toward the margin)
    if exp.printed is not None and not low:  # a float32 result rounded by the document
        half_unit = 0.5 * 10.0 ** -exp.decimals
        allowed = half_unit + allowed_error(spec, tol, dtype, exp.printed)
        targets.append((exp.printed, allowed, f"printed to {exp.decimals} decimals + '{tol.name}'", _origin(spec, exp), False))
    if exp.golden is not None and not low:
        expected = goldens.tensor(exp.golden)
        targets.append((expected, allowed_error(spec, tol, dtype, expected), f"'{tol.name}'", f"golden {exp.golden}", True))
    if exp.reference or (low and (exp.golden is not None or exp.printed is not None)):
        text = f"'low_precision' ({dtype})" if low else f"'{tol.name}'"
        targets.append((reference_out, allowed_error(spec, tol, dtype, reference_out, plain_out), text,
                        "adapters/reference.py on the same inputs", True))
    if exp.same_as is not None:
        other = _as_numbers(label.replace(repr(output), repr(exp.same_as)), results[exp.same_as])
        if exp.row is not None and (other.ndim == 0 or exp.row >= other.shape[0]):
            _fail(label, f"the same call's {exp.same_as!r} has shape {list(other.shape)}, no row {exp.row}")
        other = _select(other, exp.row)
        base = reference_out if low and tol.name != "exact" else other
        targets.append((other, allowed_error(spec, tol, dtype, base, plain_out), f"'{tol.name}'", f"the same call's {exp.same_as!r}", True))
    for expected, allowed, tol_text, origin, counts in targets:
        if np.shape(got) != np.shape(expected):
            _fail(label, f"shape {list(np.shape(got))} but should be {list(np.shape(expected))} ({origin})")
        m, index, err, limit = compare(got, expected, allowed)
        if m > 1:
            where = list((exp.row,) + tuple(int(i) for i in index)) if exp.row is not None else [int(i) for i in index]
            g, e = np.asarray(got)[index], np.asarray(expected, dtype=np.float64)[index]
            ulp = ulps(g, e, dtype)
            ulp_text = f", {ulp:.3g} ULP" if ulp is not None else ""
            _fail(label, f"worst element {where}: got {float(g)!r} but should be {float(e)!r} "
                         f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance {tol_text}{ulp_text}); "
                         f"expected value: {origin}")
        if counts:
            margin = max(margin, m)
            worst_ulp = max(worst_ulp, max_ulps(got, expected, dtype))
    if exp.differs_from is not None:
        other = _as_numbers(label.replace(repr(output), repr(exp.differs_from)), results[exp.differs_from])
        if other.shape != got.shape:
            _fail(label, f"shape {list(got.shape)} but the same call's {exp.differs_from!r} has {list(other.shape)}")
        if compare(got, other, allowed_error(spec, tol, dtype, other))[0] <= 1:
            _fail(label, f"matches the same call's {exp.differs_from!r} within tolerance '{tol.name}', but the two should differ")
    if exp.nonzero_values is not None:
        values = np.asarray(got)
        kept = values[values != 0]
        if kept.size == 0:
            _fail(label, f"every element is zero, but the kept elements should be {exp.nonzero_values!r}")
        target = np.full(kept.shape, exp.nonzero_values)
        m, index, err, limit = compare(kept, target, allowed_error(spec, tol, dtype, target))
        if m > 1:
            _fail(label, f"a kept element is {float(kept[index])!r} but every kept element "
                         f"should be {exp.nonzero_values!r} (|error| {err:.3g} > allowed {limit:.3g})")
        margin = max(margin, m)
    if exp.row_sums is not None:
        if got.ndim == 0:
            _fail(label, "a single number has no rows to sum")
        sums = np.asarray(got, dtype=np.float64).sum(axis=-1)
        target = np.full_like(sums, exp.row_sums)
        plain_sums = None if plain_out is None else np.asarray(plain_out, dtype=np.float64).sum(axis=-1)
        m, index, err, limit = compare(sums, target, allowed_error(spec, tol, dtype, target, plain_sums))
        if m > 1:
            _fail(label, f"row {[int(i) for i in index]} sums to {float(sums[index])!r} but should sum to {exp.row_sums} "
                         f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance '{tol.name}')")
        margin = max(margin, m)
    return margin, worst_ulp


def _select(value, row):
    return value if row is None else np.asarray(value)[row]


def _show(value):
    return repr(value.tolist() if isinstance(value, np.ndarray) else value)


def _origin(spec, exp):
    if not exp.source:
        return "no document source"
    return f"{spec.documents[exp.source['doc']]}: {exp.source['quote'].strip()!r}"


def run_all(spec, adapter_name, adapter, goldens, dtypes=None):
    """{test id: (outcome, message)} for the whole spec on one adapter, outside pytest.

    For checking the checker: a deliberately wrong adapter must produce "failed" somewhere.
    An exception from the adapter counts as "error", which would also fail its test.
    `dtypes` narrows the run (default: every dtype the spec runs this adapter in).
    """
    results = {}
    for test in plan.tests(spec, {adapter_name: adapter}, dtypes):
        if test.not_applicable:
            results[test.id] = ("not applicable", "")
            continue
        try:
            evaluate(spec, adapter_name, adapter, test.case, test.output, test.dtype, goldens)
            results[test.id] = ("passed", "")
        except Nonconformance as exc:
            results[test.id] = ("failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - any crash is a caught bug, and is reported as one
            results[test.id] = ("error", f"{type(exc).__name__}: {exc}")
    return results
