"""Running one case on one adapter, and the one comparison helper every check goes through."""

import collections
import decimal
import functools
import time
import warnings

import numpy as np

from attention_conformance import expectations, plan, portable, values
from attention_conformance.contract import LOW_PRECISION, OPS


class Nonconformance(AssertionError):
    pass


class AdapterRaised(Nonconformance):
    """An adapter's function raised: reported as that case's result, with the case named and the
    adapter's own exception chained (its traceback is what the author needs)."""


# (adapter, case id, dtype, ...) -> outputs: every output of a case shares one call. Bounded:
# pytest runs a case's tests together (conftest sorts them), and a GPT-2-sized case's outputs in
# four dtypes would otherwise stay in memory for the whole session.
_outputs = collections.OrderedDict()
_KEEP = 8

# Seconds spent inside the adapter's own functions, per (op, dtype), for outputs under test only (the
# oracle's time is the suite's): the framework's floor, which the benchmark tells apart from the suite's
# overhead. An adapter that raises has its time counted too; it was the framework computing.
inside_s, inside_calls = collections.Counter(), collections.Counter()
inside_cpu_s = [0.0]  # the process's CPU seconds (every thread) in those calls: what parallel runs share


def _resolve(value, dtype, goldens):
    """An input as the adapter receives it. Tensor data is float32, as the documents' tensors are
    (golden inputs are stored so), then cast to the dtype under test: every dtype sees the same numbers."""
    if isinstance(value, str) and "#" in value:
        data = goldens.tensor(value)
    elif isinstance(value, dict) and "fill" in value:
        data = np.full(value["shape"], value["fill"])
    elif isinstance(value, dict):  # PCG64 streams are stable across NumPy versions and machines
        data = _generated(value["seed"], *value["uniform"], tuple(value["shape"]))
    elif isinstance(value, list) and np.asarray(value).dtype == bool:
        return np.asarray(value)
    elif isinstance(value, (int, float, str, bool)):
        return value  # sizes, seeds, d_k, the learning rate and switches stay Python scalars; 'v1' stays a word
    else:
        data = np.array(value)
    return np.asarray(data, dtype=np.float32).astype(np_dtype(dtype))


@functools.lru_cache(maxsize=16)
def _generated(seed, low, high, shape):
    """A generated input, drawn once: GPT-2-shaped inputs are 3.2 million draws, wanted by every
    dtype, the adapter and the oracle. Read-only, so no caller can change the next one's copy."""
    data = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
    data.flags.writeable = False
    return data


def outputs(adapter_name, adapter, case, dtype, goldens, input_dtype=None, rounding=None, expectation=False):
    """The adapter's outputs for a case; input_dtype lets the reference run on the tested inputs,
    and `rounding` keys the reference's rounded-at-every-step run apart from its exact one.
    An `expectation` (the oracle's answer, never an output under test) comes from the disk cache."""
    key = (adapter_name, case.id, dtype, input_dtype, rounding, id(goldens), expectation)
    if key not in _outputs:
        kwargs = {name: _resolve(value, input_dtype or dtype, goldens) for name, value in case.inputs.items()}

        def call():
            started, cpu = time.perf_counter(), time.process_time()
            try:
                result = getattr(adapter, case.op)(**kwargs)
            except Exception as exc:  # noqa: BLE001 - whatever the adapter raises is its result for this case
                text = (str(exc).strip().splitlines() or [""])[0]
                said = f"{adapter_name} {input_dtype or dtype}, case {case.id!r}: {case.op}() raised {type(exc).__name__}" + (
                    f": {text}" if text else "")
                if expectation:  # the oracle's failure is the suite's, never the adapter under test's
                    raise RuntimeError(f"{said} (the oracle: a bug in attention-conformance, please report it)") from exc
                raise AdapterRaised(said) from exc
            finally:
                if not expectation:
                    inside_s[case.op, input_dtype or dtype] += time.perf_counter() - started
                    inside_calls[case.op, input_dtype or dtype] += 1
                    inside_cpu_s[0] += time.process_time() - cpu
            names = OPS[case.op][1]
            if len(names) == 1:
                return {names[0]: result}
            # An output the adapter declares not applicable ("attention_module/weights") may be left out.
            required = {n for n in names if not plan.not_applicable(adapter, case, input_dtype or dtype, n)}
            if not isinstance(result, dict) or not required <= set(result) <= set(names):
                got = sorted(result) if isinstance(result, dict) else type(result).__name__
                raise Nonconformance(f"{adapter_name} {case.op}() returned {got}, should return a dict with {sorted(names)}"
                                     + (f" (or without {sorted(set(names) - required)}, declared not applicable)"
                                        if required != set(names) else ""))
            return result

        keep = tuple(sorted(case.expect))  # an expectation holds only what the case checks
        if expectation:
            # Inputs the oracle says do not change its answer are left out of the key: cases that differ
            # only in them (a checkpoint's layout, which layer holds the weights) share one expectation.
            deciding = getattr(adapter, "deciding_inputs", lambda op, given: given)(case.op, kwargs)
            result = expectations.cached(case.op, deciding, rounding, adapter.__file__, call, keep)
        else:  # nor does an output under test wait for its checks holding what none of them reads
            compared = {getattr(exp, name) for exp in case.expect.values() for name in ("same_as", "differs_from")}
            result = {name: value for name, value in call().items() if name in keep or name in compared}
            result = {name: result.get(name) for name in keep} | result  # a declared-absent output is never read
        _outputs[key] = result
        while len(_outputs) > _KEEP:
            _outputs.popitem(last=False)
    _outputs.move_to_end(key)
    return _outputs[key]


def ulps(got, expected, dtype):
    """Distance in units of the last place of `dtype` at the expected value."""
    exp = np.asarray(expected, dtype=np.float64).astype(np_dtype(dtype))
    return float(np.abs(np.asarray(got, dtype=np.float64) - exp.astype(np.float64)) / np.spacing(np.abs(exp)).astype(np.float64))


def max_ulps(got, expected, dtype):
    """Largest |error| in ULPs of `dtype` at the tensor's largest expected magnitude.

    Per-element ULPs explode where an output is a near-cancellation (an entry of 1e-8 whose
    terms were O(1)); the tensor's own scale is the honest unit for the summary.
    """
    if np.size(got) == 0:
        return 0.0
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(np.asarray(got, dtype=np.float64) - expected)
    unit = np.spacing(np.asarray(np.abs(expected).max()).astype(np_dtype(dtype))).astype(np.float64)
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


class Check:
    """What one check of one output sees: the output under test and how to fail it."""

    def __init__(self, spec, adapter_name, adapter, case, output, dtype, goldens):
        self.spec, self.case, self.dtype, self.goldens = spec, case, dtype, goldens
        self.exp = case.expect[output]
        self.label = f"{adapter_name} {dtype}, case {case.id!r}, output {output!r} of {case.op}()"
        self.results = outputs(adapter_name, adapter, case, dtype, goldens)
        self.got = _as_numbers(self.label, self.results[output])
        self.tol = spec.tolerances[self.exp.tolerance] if self.exp.tolerance else None
        self.low = dtype in LOW_PRECISION
        self.reference_out = self.plain_out = None

    def fail(self, message):
        __tracebackhide__ = True
        raise Nonconformance(f"{self.label}: {message}")

    def other(self, name):
        """Another output of the same call, as numbers, with the same row selected."""
        other = _as_numbers(self.label.replace(f"output {self.exp.output!r}", f"output {name!r}"), self.results[name])
        if self.exp.row is not None and (other.ndim == 0 or self.exp.row >= other.shape[0]):
            self.fail(f"the same call's {name!r} has shape {list(other.shape)}, no row {self.exp.row}")
        return _select(other, self.exp.row)

    def allowed(self, expected, plain=None):
        return allowed_error(self.spec, self.tol, self.dtype, expected, plain)

    def against(self, expected, allowed, tol_text, origin):
        """The one comparison every value-check goes through: (margin, worst ULP), or a failure that
        names the worst element, got against expected, the error against its budget and the origin."""
        got = self.got
        if np.shape(got) != np.shape(expected):
            self.fail(f"shape {list(np.shape(got))} but should be {list(np.shape(expected))} ({origin})")
        m, index, err, limit = compare(got, expected, allowed)
        if m > 1:
            row = self.exp.row
            where = list((row,) + tuple(int(i) for i in index)) if row is not None else [int(i) for i in index]
            g, e = np.asarray(got)[index], np.asarray(expected, dtype=np.float64)[index]
            self.fail(f"worst element {where}: got {float(g)!r} but should be {float(e)!r} "
                      f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance {tol_text}, {ulps(g, e, self.dtype):.3g} ULP); "
                      f"expected value: {origin}")
        return m, max_ulps(got, expected, self.dtype)


# field -> validate(value, raw expectation, Context) returning what is wrong, or None. The loader
# calls these; the check functions below are registered in the order they run.
VALIDATE = {}
CHECKS = []


def check(name, validate=None, needs_tolerance=False):
    def register(fn):
        VALIDATE[name] = validate or (lambda value, raw, ctx: None)
        if needs_tolerance:
            TOLERANCED.add(name)
        CHECKS.append((name, fn))
        return fn

    return register


def modifier(name, validate):
    VALIDATE[name] = validate


TOLERANCED = set()  # fields compared within a named tolerance ('golden' unless the expectation names one)


def _flag(value, raw, ctx):
    return None if value is True else "only `true` means something here"


def _stat(value, raw, ctx):
    ok = isinstance(value, dict) and set(value) == {"value", "bound", "reason"} and values.is_number(value["value"]) \
        and values.is_number(value["bound"]) and isinstance(value["reason"], str)
    return None if ok else "must be {value: expected, bound: allowed |difference|, reason: why that bound}"


def _output_of_op(value, raw, ctx):
    return None if value in ctx.outputs else f"{value!r} is not an output of this op {list(ctx.outputs)}"


def _number(value, raw, ctx):
    return None if values.is_number(value) else "must be a finite number"


def _numbers(value, raw, ctx):
    ok = values.shape_of(value) is not None
    return None if ok else "must be a finite number or a regular (not ragged) list of finite numbers"


def _with_source(value, raw, ctx):
    return None if raw.get("source") else ("source", "a value copied from a document says where it came from")


def _printed(value, raw, ctx):
    problem = _numbers(value, raw, ctx)
    if problem:
        return problem
    decimals = raw.get("decimals")
    if not values.is_int(decimals, 0, 8):
        return "decimals", "a printed value says how many decimals the document printed (0..8)"
    finer = next((v for v in values.numbers(value)[0] if decimal.Decimal(repr(v)).as_tuple().exponent < -decimals), None)
    if finer is not None:
        return f"{finer!r} has more than the {decimals} decimals the document printed"
    return _with_source(value, raw, ctx)


def _source(value, raw, ctx):
    ok = isinstance(value, dict) and set(value) == {"doc", "quote"} and values.one_of(value["doc"], ctx.documents) \
        and isinstance(value["quote"], str) and value["quote"].strip()
    return None if ok else f"must be {{doc: one of {sorted(ctx.documents)}, quote: the sentence or code line}}"


def _tolerance(value, raw, ctx):
    return None if values.one_of(value, ctx.tolerances) else f"{value!r} is not defined under 'tolerances'"


def _shape(value, raw, ctx):
    if not (isinstance(value, list) and all(values.is_int(n) for n in value)):
        return "must be a list of non-negative integers"
    return _with_source(value, raw, ctx)


modifier("row", lambda value, raw, ctx: None if values.is_int(value) else "must be a non-negative integer")
modifier("decimals", lambda value, raw, ctx: None if "printed" in raw and values.is_int(value, 0, 8) else
         "the number of decimals a `printed` value was printed with (0..8)")
modifier("tolerance", _tolerance)
modifier("source", _source)
modifier("note", lambda value, raw, ctx: None if isinstance(value, str) else "must be text")


@check("shape", _shape)
def _check_shape(c):
    if list(c.got.shape) != c.exp.shape:
        c.fail(f"shape {list(c.got.shape)} but should be {c.exp.shape} ({_origin(c.spec, c.exp)})")


@check("check_dtype", _flag)
def _check_dtype(c):
    if str(c.got.dtype) != c.dtype:
        c.fail(f"dtype {c.got.dtype} but should be {c.dtype}")


@check("in_range", lambda value, raw, ctx: None if isinstance(value, list) and len(value) == 2 and all(map(values.is_number, value))
       else "must be [low, high], read as low <= value < high")
def _check_in_range(c):
    low, high = c.exp.in_range
    got = c.got.astype(np.float64)
    if not (low <= got.min() and got.max() < high):  # NaN fails too
        c.fail(f"values span [{float(got.min())!r}, {float(got.max())!r}] but should lie in [{low}, {high})")


@check("upper_triangle_zero", _flag)
def _check_upper_triangle_zero(c):
    if c.got.ndim < 2:
        c.fail(f"shape {list(c.got.shape)} has no rows and columns of weights")
    above = np.triu(np.ones(c.got.shape[-2:], dtype=bool), k=1)
    leaked = np.argwhere((c.got != 0) & above)
    if leaked.size:
        i = tuple(int(n) for n in leaked[0])
        c.fail(f"element {list(i)} above the diagonal is {float(c.got[i])!r}: a query sees a later key")


@check("zero_fraction", _stat)
def _check_zero_fraction(c):
    zf = c.exp.zero_fraction
    fraction = float(np.mean(c.got == 0))
    if abs(fraction - zf["value"]) > zf["bound"]:
        c.fail(f"{fraction:.5f} of the elements are zero but should be {zf['value']} +- {zf['bound']} ({zf['reason']})")


@check("mean", _stat)
def _check_mean(c):
    stat = c.exp.mean
    mean = float(np.mean(c.got.astype(np.float64)))
    if not abs(mean - stat["value"]) <= stat["bound"]:  # NaN fails too
        c.fail(f"mean {mean!r} but should be {stat['value']} +- {stat['bound']} ({stat['reason']})")


@check("min_below", _number)
def _check_min_below(c):
    if not float(np.min(c.got)) < c.exp.min_below:
        c.fail(f"smallest value {float(np.min(c.got))!r} but some value should be below {c.exp.min_below}")


@check("equals", lambda value, raw, ctx: None if values.bools(value) or values.shape_of(value) is not None
       else "must be a finite float32 number, true/false, or a regular list of them")
def _check_equals(c):
    if c.got.shape != np.shape(c.exp.equals) or not np.array_equal(c.got, np.asarray(c.exp.equals)):
        c.fail(f"got {_show(c.got)} but should be exactly {c.exp.equals!r} ({_origin(c.spec, c.exp)})")


@check("printed", _printed, needs_tolerance=True)
def _check_printed(c):
    """A float32 result the document rounded: within half a unit of its last decimal, plus the tolerance.
    Not a margin: it mostly measures how near the true value sits to the rounding boundary."""
    if c.low:  # the reference on the same inputs stands in (below)
        return None
    allowed = 0.5 * 10.0 ** -c.exp.decimals + c.allowed(c.exp.printed)
    c.against(c.exp.printed, allowed, f"printed to {c.exp.decimals} decimals + '{c.tol.name}'", _origin(c.spec, c.exp))
    return None


@check("golden", lambda value, raw, ctx: None if values.is_golden_ref(value)
       else "must be a reference like 'file.json#tensor' to a file inside golden/", needs_tolerance=True)
def _check_golden(c):
    if c.low:
        return None
    expected = c.goldens.tensor(c.exp.golden)
    return c.against(expected, c.allowed(expected), f"'{c.tol.name}'", f"golden {c.exp.golden}")


@check("reference", _flag, needs_tolerance=True)
def _check_reference(c):
    """The oracle on the very inputs under test; in half precision it also stands in for golden and
    printed values, which were computed from float32 inputs."""
    if not (c.exp.reference or (c.low and (c.exp.golden is not None or c.exp.printed is not None))):
        return None
    text = f"'low_precision' ({c.dtype})" if c.low else f"'{c.tol.name}'"
    return c.against(c.reference_out, c.allowed(c.reference_out, c.plain_out), text, "adapters/reference.py on the same inputs")


@check("same_as", _output_of_op, needs_tolerance=True)
def _check_same_as(c):
    other = c.other(c.exp.same_as)
    base = c.reference_out if c.low and c.tol.name != "exact" else other
    return c.against(other, c.allowed(base, c.plain_out), f"'{c.tol.name}'", f"the same call's {c.exp.same_as!r}")


@check("differs_from", _output_of_op, needs_tolerance=True)
def _check_differs_from(c):
    other = _as_numbers(c.label.replace(f"output {c.exp.output!r}", f"output {c.exp.differs_from!r}"), c.results[c.exp.differs_from])
    if other.shape != c.got.shape:
        c.fail(f"shape {list(c.got.shape)} but the same call's {c.exp.differs_from!r} has {list(other.shape)}")
    if compare(c.got, other, c.allowed(other))[0] <= 1:
        c.fail(f"matches the same call's {c.exp.differs_from!r} within tolerance '{c.tol.name}', but the two should differ")


@check("nonzero_values", _number, needs_tolerance=True)
def _check_nonzero_values(c):
    kept = c.got[c.got != 0]
    if kept.size == 0:
        c.fail(f"every element is zero, but the kept elements should be {c.exp.nonzero_values!r}")
    target = np.full(kept.shape, c.exp.nonzero_values)
    m, index, err, limit = compare(kept, target, c.allowed(target))
    if m > 1:
        c.fail(f"a kept element is {float(kept[index])!r} but every kept element "
               f"should be {c.exp.nonzero_values!r} (|error| {err:.3g} > allowed {limit:.3g})")
    return m, 0.0


@check("row_sums", _numbers, needs_tolerance=True)
def _check_row_sums(c):
    if c.got.ndim == 0:
        c.fail("a single number has no rows to sum")
    sums = portable.sum(c.got.astype(np.float64), axis=-1)
    target = np.full_like(sums, c.exp.row_sums)
    plain_sums = None if c.plain_out is None else portable.sum(np.asarray(c.plain_out, dtype=np.float64), axis=-1)
    m, index, err, limit = compare(sums, target, c.allowed(target, plain_sums))
    if m > 1:
        c.fail(f"row {[int(i) for i in index]} sums to {float(sums[index])!r} but should sum to {c.exp.row_sums} "
               f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance '{c.tol.name}')")
    return m, 0.0


NEEDS_ELEMENTS = {"in_range", "zero_fraction", "mean", "min_below", "nonzero_values"}


def evaluate(spec, adapter_name, adapter, case, output, dtype, goldens):
    """Check one output of one case; return (margin, worst ULP): margin 0 = exact, 1 = whole budget.

    Each field of the expectation is one check function above, run in their order. The margin
    counts computed expectations only (golden values, the reference, agreements, row sums).
    Raises Nonconformance with a one-paragraph message naming the framework, dtype, case, output,
    worst element, got vs expected, the error against its tolerance and its origin.
    """
    __tracebackhide__ = True
    with np.errstate(all="ignore"):  # overflow or 0/0 in a wrong output is the adapter's failure, reported as such
        c = Check(spec, adapter_name, adapter, case, output, dtype, goldens)
        given = c.exp.checks
        if c.exp.row is not None:
            if c.got.ndim == 0 or c.exp.row >= c.got.shape[0]:
                c.fail(f"shape {list(c.got.shape)} has no row {c.exp.row}")
        if "shape" in given:  # the shape a document printed is of the whole output
            _check_shape(c)
        c.got = _select(c.got, c.exp.row)
        if c.got.size == 0 and NEEDS_ELEMENTS & set(given):
            c.fail(f"shape {list(c.got.shape)} has no elements")
        if c.exp.reference or (c.low and c.tol is not None):
            _reference_outputs(c)
        margin = worst_ulp = 0.0
        for name, fn in CHECKS:
            if name in given and name != "shape" or name == "reference":
                measured = fn(c)
                if measured is not None:
                    margin, worst_ulp = max(margin, measured[0]), max(worst_ulp, measured[1])
        return margin, worst_ulp


def _reference_outputs(c):
    """The float64 oracle on the inputs as the adapter received them (rounded to the dtype); in half
    precision also `plain`, the same computation rounded to the dtype after every step: the error a
    careful computation in that dtype makes, which sets the budget."""
    from attention_conformance.adapters import reference

    output, row = c.exp.output, c.exp.row
    exact = outputs("reference", reference, c.case, "float64", c.goldens, input_dtype=c.dtype, expectation=True)
    c.reference_out = _select(exact[output], row)
    if c.low:
        with reference.rounding_to(np_dtype(c.dtype)):
            plain = outputs("reference", reference, c.case, "float64", c.goldens, input_dtype=c.dtype, rounding=c.dtype,
                            expectation=True)[output]
        c.plain_out = _select(np.asarray(plain).astype(np_dtype(c.dtype)), row)  # the result is stored in the dtype too


def validate(raw, ctx):
    """(field, what is wrong) for the first invalid field of a raw expectation, or None. A field's
    validator may name another field as the culprit. `ctx` has the op's outputs, the spec's
    documents and tolerances."""
    for name, value in raw.items():
        problem = VALIDATE[name](value, raw, ctx)
        if problem:
            return problem if isinstance(problem, tuple) else (name, problem)
    return None


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
    An exception from the adapter fails its tests, as under pytest; any other exception counts as "error".
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
