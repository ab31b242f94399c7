"""The fields of an expectation (what the spec says about one output of a case), each declared once:
the validator the loader runs on its value, and the verifier that holds an output under test to it.

A verifier receives the output under test (`verify.Subject`: the numbers got, the expectation, the
dtype, how to fail) and returns (margin, worst ULP) when it compared against computed values, or
None. Verifiers run in the order they are declared here. A field without a verifier qualifies the
others (which row, which tolerance, how many decimals were printed, where a value came from).
"""

import decimal
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_conformance import deterministic
from attention_conformance.cases import yaml_values
from attention_conformance.margin import as_numbers, compare, show


@dataclass(frozen=True)
class Field:
    name: str
    validate: Callable  # (value, raw expectation, context) -> what is wrong, (field, what is wrong), or None
    verify: Callable = None  # (subject) -> (margin, worst ULP) or None; None: a qualifier, verifying nothing alone
    toleranced: bool = False  # compared within a named tolerance ('golden' unless the expectation names one)
    computed: bool = False  # compared with computed values: repeated in the dtype sweep (plan.applies)
    elements: bool = False  # says something about the elements: an empty output fails it
    other_output: bool = False  # its value names another output of the same call, which is kept for it
    whole: bool = False  # about the whole output, before `row` selects one
    always: bool = False  # its verifier runs whether the field is given or not, and decides itself


FIELDS = {}  # name -> Field, in the order the verifiers run


def qualifier(name, validate):
    FIELDS[name] = Field(name, validate)


def verifier(name, validate=None, **flags):
    def register(fn):
        FIELDS[name] = Field(name, validate or (lambda value, raw, ctx: None), fn, **flags)
        return fn

    return register


def validate(raw, ctx):
    """(field, what is wrong) for the first invalid field of a raw expectation, or None. A field's
    validator may name another field as the culprit. `ctx` has the op's outputs, the spec's
    documents and tolerances."""
    for name, value in raw.items():
        problem = FIELDS[name].validate(value, raw, ctx)
        if problem:
            return problem if isinstance(problem, tuple) else (name, problem)
    return None


def origin(spec, exp):
    """Where a value the spec states came from: the document and its quoted line."""
    if not exp.source:
        return "no document source"
    return f"{spec.documents[exp.source['doc']]}: {exp.source['quote'].strip()!r}"


# --- validators ----------------------------------------------------------------------------------


def _flag(value, raw, ctx):
    return None if value is True else "only `true` means something here"


def _stat(value, raw, ctx):
    ok = (
        isinstance(value, dict)
        and set(value) == {"value", "bound", "reason"}
        and yaml_values.is_number(value["value"])
        and yaml_values.is_number(value["bound"])
        and isinstance(value["reason"], str)
    )
    return None if ok else "must be {value: expected, bound: allowed |difference|, reason: why that bound}"


def _output_of_op(value, raw, ctx):
    return None if value in ctx.outputs else f"{value!r} is not an output of this op {list(ctx.outputs)}"


def _number(value, raw, ctx):
    return None if yaml_values.is_number(value) else "must be a finite number"


def _numbers(value, raw, ctx):
    ok = yaml_values.shape_of(value) is not None
    return None if ok else "must be a finite number or a regular (not ragged) list of finite numbers"


def _with_source(value, raw, ctx):
    return None if raw.get("source") else ("source", "a value copied from a document says where it came from")


def _printed(value, raw, ctx):
    problem = _numbers(value, raw, ctx)
    if problem:
        return problem
    decimals = raw.get("decimals")
    if not yaml_values.is_int(decimals, 0, 8):
        return "decimals", "a printed value says how many decimals the document printed (0..8)"
    finer = next(
        (v for v in yaml_values.numbers(value)[0] if decimal.Decimal(repr(v)).as_tuple().exponent < -decimals), None
    )
    if finer is not None:
        return f"{finer!r} has more than the {decimals} decimals the document printed"
    return _with_source(value, raw, ctx)


def _source(value, raw, ctx):
    ok = (
        isinstance(value, dict)
        and set(value) == {"doc", "quote"}
        and yaml_values.one_of(value["doc"], ctx.documents)
        and isinstance(value["quote"], str)
        and value["quote"].strip()
    )
    return None if ok else f"must be {{doc: one of {sorted(ctx.documents)}, quote: the sentence or code line}}"


def _tolerance(value, raw, ctx):
    return None if yaml_values.one_of(value, ctx.tolerances) else f"{value!r} is not defined under 'tolerances'"


def _shape(value, raw, ctx):
    if not (isinstance(value, list) and all(yaml_values.is_int(n) for n in value)):
        return "must be a list of non-negative integers"
    return _with_source(value, raw, ctx)


# --- the fields --------------------------------------------------------------------------------------

qualifier("row", lambda value, raw, ctx: None if yaml_values.is_int(value) else "must be a non-negative integer")
qualifier(
    "decimals",
    lambda value, raw, ctx: (
        None
        if "printed" in raw and yaml_values.is_int(value, 0, 8)
        else "the number of decimals a `printed` value was printed with (0..8)"
    ),
)
qualifier("tolerance", _tolerance)
qualifier("source", _source)
qualifier("note", lambda value, raw, ctx: None if isinstance(value, str) else "must be text")


@verifier("shape", _shape, whole=True)
def _shape_of(c):
    if list(c.got.shape) != c.exp.shape:
        c.fail(f"shape {list(c.got.shape)} but should be {c.exp.shape} ({origin(c.spec, c.exp)})")


@verifier("check_dtype", _flag)
def _dtype_of(c):
    if str(c.got.dtype) != c.dtype:
        c.fail(f"dtype {c.got.dtype} but should be {c.dtype}")


@verifier(
    "in_range",
    lambda value, raw, ctx: (
        None
        if isinstance(value, list) and len(value) == 2 and all(map(yaml_values.is_number, value))
        else "must be [low, high], read as low <= value < high"
    ),
    elements=True,
)
def _in_range(c):
    low, high = c.exp.in_range
    got = c.got.astype(np.float64)
    if not (low <= got.min() and got.max() < high):  # NaN fails too
        c.fail(f"values span [{float(got.min())!r}, {float(got.max())!r}] but should lie in [{low}, {high})")


@verifier("upper_triangle_zero", _flag)
def _upper_triangle_zero(c):
    if c.got.ndim < 2:
        c.fail(f"shape {list(c.got.shape)} has no rows and columns of weights")
    above = np.triu(np.ones(c.got.shape[-2:], dtype=bool), k=1)
    leaked = np.argwhere((c.got != 0) & above)
    if leaked.size:
        i = tuple(int(n) for n in leaked[0])
        c.fail(f"element {list(i)} above the diagonal is {float(c.got[i])!r}: a query sees a later key")


@verifier("zero_fraction", _stat, elements=True)
def _zero_fraction(c):
    zf = c.exp.zero_fraction
    fraction = float(np.mean(c.got == 0))
    if abs(fraction - zf["value"]) > zf["bound"]:
        c.fail(f"{fraction:.5f} of the elements are zero but should be {zf['value']} +- {zf['bound']} ({zf['reason']})")


@verifier("mean", _stat, elements=True)
def _mean(c):
    stat = c.exp.mean
    mean = float(np.mean(c.got.astype(np.float64)))
    if not abs(mean - stat["value"]) <= stat["bound"]:  # NaN fails too
        c.fail(f"mean {mean!r} but should be {stat['value']} +- {stat['bound']} ({stat['reason']})")


@verifier("min_below", _number, elements=True)
def _min_below(c):
    if not float(np.min(c.got)) < c.exp.min_below:
        c.fail(f"smallest value {float(np.min(c.got))!r} but some value should be below {c.exp.min_below}")


@verifier(
    "equals",
    lambda value, raw, ctx: (
        None
        if yaml_values.bools(value) or yaml_values.shape_of(value) is not None
        else "must be a finite float32 number, true/false, or a regular list of them"
    ),
)
def _equals(c):
    if c.got.shape != np.shape(c.exp.equals) or not np.array_equal(c.got, np.asarray(c.exp.equals)):
        c.fail(f"got {show(c.got)} but should be exactly {c.exp.equals!r} ({origin(c.spec, c.exp)})")


@verifier("printed", _printed, toleranced=True)
def _printed_value(c):
    """A float32 result the document rounded: within half a unit of its last decimal, plus the tolerance.
    Not a margin: it mostly measures how near the true value sits to the rounding boundary."""
    if c.low:  # the reference on the same inputs stands in (below)
        return None
    allowed = 0.5 * 10.0**-c.exp.decimals + c.allowed(c.exp.printed)
    c.against(c.exp.printed, allowed, f"printed to {c.exp.decimals} decimals + '{c.tol.name}'", origin(c.spec, c.exp))
    return None


@verifier(
    "golden",
    lambda value, raw, ctx: (
        None
        if yaml_values.is_golden_ref(value)
        else "must be a reference like 'file.json#tensor' to a file inside golden/"
    ),
    toleranced=True,
    computed=True,
)
def _golden(c):
    if c.low:
        return None
    expected = c.goldens.tensor(c.exp.golden)
    return c.against(expected, c.allowed(expected), f"'{c.tol.name}'", f"golden {c.exp.golden}")


@verifier("reference", _flag, toleranced=True, computed=True, always=True)
def _reference(c):
    """The oracle on the very inputs under test; in half precision it also stands in for golden and
    printed values, which were computed from float32 inputs."""
    if not (c.exp.reference or (c.low and (c.exp.golden is not None or c.exp.printed is not None))):
        return None
    origin = "the built-in reference adapter on the same inputs"
    if c.model_allowed is not None:  # explain's and fuzz's model: one verdict for one output on one input
        return c.against(c.reference_out, c.model_allowed, f"model k x B + E + one ULP ({c.dtype})", origin)
    text = f"'low_precision' ({c.dtype})" if c.low else f"'{c.tol.name}'"
    return c.against(c.reference_out, c.allowed(c.reference_out, c.plain_out), text, origin)


@verifier("same_as", _output_of_op, toleranced=True, computed=True, other_output=True)
def _same_as(c):
    other = c.other(c.exp.same_as)
    base = c.reference_out if c.low and c.tol.name != "exact" else other
    return c.against(other, c.allowed(base, c.plain_out), f"'{c.tol.name}'", f"the same call's {c.exp.same_as!r}")


@verifier("differs_from", _output_of_op, toleranced=True, other_output=True)
def _differs_from(c):
    other = as_numbers(
        c.label.replace(f"output {c.exp.output!r}", f"output {c.exp.differs_from!r}"), c.results[c.exp.differs_from]
    )
    if other.shape != c.got.shape:
        c.fail(f"shape {list(c.got.shape)} but the same call's {c.exp.differs_from!r} has {list(other.shape)}")
    if compare(c.got, other, c.allowed(other))[0] <= 1:
        c.fail(
            f"matches the same call's {c.exp.differs_from!r} within tolerance '{c.tol.name}', but the two should differ"
        )


@verifier("nonzero_values", _number, toleranced=True, elements=True)
def _nonzero_values(c):
    kept = c.got[c.got != 0]
    if kept.size == 0:
        c.fail(f"every element is zero, but the kept elements should be {c.exp.nonzero_values!r}")
    target = np.full(kept.shape, c.exp.nonzero_values)
    m, index, err, limit = compare(kept, target, c.allowed(target))
    if m > 1:
        c.fail(
            f"a kept element is {float(kept[index])!r} but every kept element "
            f"should be {c.exp.nonzero_values!r} (|error| {err:.3g} > allowed {limit:.3g})"
        )
    return m, 0.0


@verifier("row_sums", _numbers, toleranced=True, computed=True)
def _row_sums(c):
    if c.got.ndim == 0:
        c.fail("a single number has no rows to sum")
    sums = deterministic.sum(c.got.astype(np.float64), axis=-1)
    target = np.full_like(sums, c.exp.row_sums)
    plain_sums = None if c.plain_out is None else deterministic.sum(np.asarray(c.plain_out, dtype=np.float64), axis=-1)
    m, index, err, limit = compare(sums, target, c.allowed(target, plain_sums))
    if m > 1:
        c.fail(
            f"row {c.element(index)} sums to {float(sums[index])!r} but should sum to {c.exp.row_sums} "
            f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance '{c.tol.name}')"
        )
    c.keep(
        index, sums[index], target[index], err, limit, f"'{c.tol.name}'", "row_sums: the element is a row, got its sum"
    )
    return m, 0.0
