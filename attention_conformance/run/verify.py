"""Verifying one test (one output of one case, on one adapter, in one dtype) against its expectation,
and the whole spec on one adapter outside pytest."""

import functools

import numpy as np

from attention_conformance import remembered, sides
from attention_conformance.cases import plan
from attention_conformance.cases.fields import FIELDS
from attention_conformance.dtypes import LOW_PRECISION, np_dtype
from attention_conformance.margin import Nonconformance, allowed_error, as_numbers, compare, max_ulps, ulps
from attention_conformance.run import calls, tolerance_model


class Subject:
    """The output under test, as each field's verifier sees it, and how to fail it."""

    def __init__(self, spec, adapter_name, adapter, case, output, dtype, goldens, precision=None, convention=None):
        self.spec, self.case, self.dtype, self.goldens = spec, case, dtype, goldens
        # A declared precision (divergences.Divergence): judged at the accuracy it names, not the dtype's own.
        self.judged_at = precision.judged_at(dtype) if precision else dtype
        self.sums_in_dtype = bool(precision and precision.sums_in_dtype)
        self.within = (precision and precision.within) or 1.0
        self.declared = f", at {precision.said(dtype)} as {precision.fact!r} declares" if precision else ""
        # A declared convention: the oracle computes the side it names, or the entry states what its outputs hold.
        self.side = convention.side if convention else None
        self.on_side = (
            f"; judged on the side {convention.side_text} that {convention.fact!r} declares" if convention else ""
        )
        self.exp = (convention and convention.expect or {}).get(output) or case.expect[output]
        self.nan_expected = (self.side or {}).get("fully_masked_rows") == "nan"
        self.label = f"{adapter_name} {dtype}, case {case.id!r}, output {output!r} of {case.op}()"
        self.results = calls.outputs(adapter_name, adapter, case, dtype, goldens)
        self.got = as_numbers(self.label, self.results[output])
        self.tol = spec.tolerances[self.exp.tolerance] if self.exp.tolerance else None
        self.low = self.judged_at in LOW_PRECISION
        self.reference_out = self.plain_out = None
        self.model_allowed = None  # the tolerance model's allowance for the reference's values, where it has one
        self.compared = None  # the last comparison's worst element, for the report of a test that passes

    def fail(self, message, worst=None):
        __tracebackhide__ = True
        convention = self.case.convention  # where the math has no single answer, the spec chose one: say which
        if self.on_side:  # not the spec's convention: the side the declaration names
            raise Nonconformance(f"{self.label}: {message}{self.on_side}", worst)
        raise Nonconformance(
            f"{self.label}: {message}"
            + (
                f"; this case states the spec's conventions.{convention} (`attention-conformance docs contract`): "
                "a framework that follows another declares it in KNOWN_DIVERGENCES, shown as `conv`"
                if convention
                else ""
            ),
            worst,
        )

    def other(self, name):
        """Another output of the same call, as numbers, with the same row selected."""
        other = as_numbers(self.label.replace(f"output {self.exp.output!r}", f"output {name!r}"), self.results[name])
        if self.exp.row is not None and (other.ndim == 0 or self.exp.row >= other.shape[0]):
            self.fail(f"the same call's {name!r} has shape {list(other.shape)}, no row {self.exp.row}")
        return _select(other, self.exp.row)

    def element(self, index):
        """An index into the compared values as an index into the whole output: the selected row first."""
        return ([] if self.exp.row is None else [self.exp.row]) + [int(i) for i in index]

    def keep(self, index, got, expected, error, allowed, tol_text, origin):
        """Keep a comparison's worst element, for the report: a passing test's, or the failure's."""
        self.compared = {
            "element": self.element(index),
            "got": float(got),
            "expected": float(expected),
            "error": error,
            "allowed": allowed,
            "tolerance": tol_text,
            "from": origin,
            "elements": int(np.size(self.got)),  # how small the case is, where it failed (run/root_cause.py)
        }

    def allowed(self, expected, plain=None):
        return allowed_error(self.spec, self.tol, self.judged_at, expected, plain)

    def against(self, expected, allowed, tol_text, origin):
        """The one comparison every verifier of computed values goes through: (margin, worst ULP), or a
        failure that names the worst element, got against expected, the error against its budget and the origin."""
        got, allowed, tol_text = self.got, np.asarray(allowed) * self.within, tol_text + self.declared
        if np.shape(got) != np.shape(expected):
            self.fail(f"shape {list(np.shape(got))} but should be {list(np.shape(expected))} ({origin})")
        m, index, err, limit = compare(got, expected, allowed, nan_expected=self.nan_expected)
        if np.size(got) == 0:  # nothing to compare, nothing to name
            return m, max_ulps(got, expected, self.judged_at)
        g, e = np.asarray(got)[index], np.asarray(expected, dtype=np.float64)[index]
        self.keep(index, g, e, err, limit, tol_text, origin)
        if m > 1:
            # Where the only answer is 0 a ULP there is the smallest subnormal: "6.55e+39 ULP" said nothing (a trial).
            size = f"{ulps(g, e, self.judged_at):.3g} ULP of {self.judged_at}"
            if limit == 0 and e == 0:
                size = (
                    "nothing there can round: a hidden key's weight and a padding query's row are 0 in any correct one"
                )
            self.fail(
                f"worst element {self.element(index)}: got {float(g)!r} but should be {float(e)!r} "
                f"(|error| {err:.3g} > allowed {limit:.3g} from tolerance {tol_text}, {size}); "
                f"expected value: {origin}",
                self.compared,
            )
        return m, max_ulps(got, expected, self.judged_at)


def verify(spec, adapter_name, adapter, case, output, dtype, goldens, precision=None, convention=None):
    """Verify one output of one case; return (margin, worst ULP, worst): margin 0 = exact, 1 = whole budget;
    worst = the element that set the margin ({"element", "got", "expected", "error", "allowed", "tolerance",
    "from"}), or None where a comparison that names no element set it (the kept values of a dropout).

    Each field of the expectation has its verifier (attention_conformance/cases/fields.py), run in their
    order. The margin counts computed values only (golden values, the reference, agreements, row sums).
    Raises Nonconformance with a one-paragraph message naming the framework, dtype, case, output,
    worst element, got vs expected, the error against its tolerance and its origin.
    """
    __tracebackhide__ = True
    with np.errstate(all="ignore"):  # overflow or 0/0 in a wrong output is the adapter's failure, reported as such
        c = Subject(spec, adapter_name, adapter, case, output, dtype, goldens, precision, convention)
        given = [FIELDS[name] for name in c.exp.given]
        named = set(c.exp.given)
        if c.exp.row is not None:
            if c.got.ndim == 0 or c.exp.row >= c.got.shape[0]:
                c.fail(f"shape {list(c.got.shape)} has no row {c.exp.row}")
        for field in given:
            if field.whole:
                field.verify(c)
        c.got = _select(c.got, c.exp.row)
        if c.got.size == 0 and any(field.elements for field in given):
            c.fail(f"shape {list(c.got.shape)} has no elements")
        if asks_oracle(case, output, c.judged_at, c.exp):
            _reference_outputs(c)
        margin = worst_ulp = 0.0
        worst, largest = None, -1.0
        for field in FIELDS.values():
            if field.verify and (field.name in named and not field.whole or field.always):
                c.compared = None
                measured = field.verify(c)
                if measured is not None:
                    if measured[0] > largest:
                        largest, worst = measured[0], c.compared
                    margin, worst_ulp = max(margin, measured[0]), max(worst_ulp, measured[1])
        return margin, worst_ulp, worst


class StaleDeclaration(Nonconformance):
    """A declared raise that did not happen: the adapter returned numbers where its divergence says it refuses."""


def judged(spec, adapter_name, adapter, case, output, dtype, goldens, divergence=None):
    """verify() with what `divergence` declares checked, the one place that says what a declaration does to a test:
    (margin, worst ULP, worst, what the declaration checked: a dict for the report, or None). A precision is judged at
    its own dtype first, then, if that fails, at the accuracy it declares (the report says which it needed); a raise
    passes when the call raises the declared exception (its class or a base of that name, its message matching) and
    fails otherwise, StaleDeclaration when numbers come back. A convention with its side (or its own expectations) is
    judged on that side, and stale where the spec's own holds. A bug, or a convention that states no side, is the
    caller's strict expected failure: verified as it is."""
    __tracebackhide__ = True
    args = (spec, adapter_name, adapter, case, output, dtype, goldens)
    if divergence is None or divergence.unbounded:
        return (*verify(*args), None)
    if divergence.kind == "convention":
        try:
            verify(*args)
        except calls.AdapterRaised:
            raise
        except Nonconformance:
            return _on_side(args, divergence)
        raise StaleDeclaration(
            f"{adapter_name} {dtype}, case {case.id!r}: output {output!r} of {case.op}() follows the spec's convention "
            f"where {divergence.fact!r} ({divergence.source}) declares {divergence.side_text}: remove the test from "
            "the entry, or narrow its pattern"
        )
    if divergence.kind == "raises":
        try:
            verify(*args)
        except calls.AdapterRaised as exc:
            cause = exc.__cause__
            said = f"{type(cause).__name__}: {(str(cause).strip().splitlines() or [''])[0][:300]}"
            if divergence.matches_raise(cause):
                return None, None, None, divergence.check({"raised": said})
            raise Nonconformance(
                f"{exc}; {divergence.fact!r} ({divergence.source}) declares it raises {divergence.raises} matching "
                f"{divergence.match!r}"
            ) from None
        except Nonconformance:
            pass
        raise StaleDeclaration(
            f"{adapter_name} {dtype}, case {case.id!r}: {case.op}() returned numbers where {divergence.fact!r} "
            f"({divergence.source}) declares it raises {divergence.raises}: the raise is gone (remove the test from "
            "the entry, or narrow its pattern)"
        )
    try:
        return (*verify(*args), divergence.check({"judged_at": dtype, "needed": False}))
    except calls.AdapterRaised:
        raise
    except Nonconformance:
        found = verify(*args, precision=divergence)
        # Where the declared precision's bound is infinite (a bfloat16 sum of 1024 terms, n u >= 1) it judged nothing:
        # said apart, with the excuses that have no bound.
        bounded = bool(found[2] is None or found[2]["allowed"] < np.finfo(np.float64).max)
        return (*found, divergence.check({"judged_at": divergence.said(dtype), "needed": True, "bounded": bounded}))


def _on_side(args, convention):
    """A convention judged on its side; where a precision covers the test too and the side fails at the dtype's own
    accuracy, at the precision's (the report keeps both)."""
    checked = {"side": convention.side_text}
    precision = convention.precision
    _, adapter_name, _, case, output, dtype, _ = args
    idle = _changing_nothing(args, convention)
    if idle:
        split = idle[0]
        raise Nonconformance(
            f"{adapter_name} {dtype}, case {case.id!r}, output {output!r}: {split}={convention.side[split]}, which "
            f"{convention.fact!r} ({convention.source}) declares, changes nothing here (the oracle's answer on it is "
            "the spec's own): the test has no such split; remove it from the side, or the test from the entry"
        )
    try:
        return (*verify(*args, convention=convention), convention.check(checked))
    except calls.AdapterRaised:
        raise
    except Nonconformance:
        if precision is None:
            raise
    found = verify(*args, precision=precision, convention=convention)
    said = precision.check({"judged_at": precision.said(args[5]), "needed": True, "bounded": True})
    return (*found, convention.check(checked | {"precision": said}))


def _changing_nothing(args, convention):
    """The splits of a convention's side whose oracle answer for this test is the spec's own: a side declared where the
    case has no such split (a top-left alignment named on a fully masked row: an outside trial saw it pass)."""
    from attention_conformance.adapters import reference

    _, _, _, case, output, dtype, goldens = args
    if not (convention.side and case.expect[output].reference):
        return []

    def answer(side):
        on = f" on {sides.label(side)}" if side else None  # the keys _reference_outputs gives the same answers
        with sides.taking(side):
            return calls.outputs(
                "reference", reference, case, "float64", goldens, input_dtype=dtype, rounding=on, oracle=True
            )[output]

    own = np.asarray(answer(None), dtype=np.float64)
    return [
        split
        for split, choice in convention.side.items()
        if np.array_equal(np.asarray(answer({split: choice}), dtype=np.float64), own, equal_nan=True)
    ]


def asks_oracle(case, output, dtype, exp=None):
    """Whether verifying this output asks the oracle: a reference expectation, or any tolerance in half precision
    (`exp`: the expectation judged, where a convention's entry states its own)."""
    exp = exp or case.expect[output]
    return bool(exp.reference) or (dtype in LOW_PRECISION and bool(exp.tolerance))


def _reference_outputs(c):
    """The float64 oracle on the inputs as the adapter received them (rounded to the dtype); `plain`, the
    same computation rounded after every step to the dtype (float32 for float64): the error a careful
    computation makes; and the allowance of the tolerance model (tolerance_model.py), `explain`'s and `fuzz`'s,
    where it has a derived bound for the op."""
    from attention_conformance.adapters import reference

    output, row = c.exp.output, c.exp.row
    on = f" on {sides.label(c.side)}" if c.side else ""  # the answers of a side declared are keyed apart
    # The bound right after the exact answer, the products it computed remembered: the bound's values are them.
    with remembered.remembering_products(), sides.taking(c.side):
        exact = calls.outputs(
            "reference", reference, c.case, "float64", c.goldens, input_dtype=c.dtype, rounding=on or None, oracle=True
        )
        c.reference_out = _select(exact[output], row)
        derived = calls.outputs(
            "reference",
            tolerance_model.Derived(c.judged_at, c.sums_in_dtype),
            c.case,
            "float64",
            c.goldens,
            input_dtype=c.dtype,
            rounding=f"bound {c.judged_at}" + " summing in it" * c.sums_in_dtype + on,
            oracle=True,
        )[output]
    plain_dtype = tolerance_model.plain_dtype(c.judged_at)
    with reference.rounding_to(np_dtype(plain_dtype)), sides.taking(c.side):
        plain = calls.outputs(
            "reference",
            reference,
            c.case,
            "float64",
            c.goldens,
            input_dtype=c.dtype,
            rounding=plain_dtype + on,
            oracle=True,
        )[output]
    c.plain_out = _select(np.asarray(plain).astype(np_dtype(plain_dtype)), row)  # the result is stored in it too
    if derived is not None and np.asarray(derived).dtype != object:
        k = _model()[c.judged_at]
        c.model_allowed = tolerance_model.allowed(c.judged_at, c.reference_out, c.plain_out, _select(derived, row), k)


@functools.cache
def _model():
    return tolerance_model.model()


def _select(value, row):
    return value if row is None else np.asarray(value)[row]


def verify_all(spec, adapter_name, adapter, goldens, dtypes=None, declared=None):
    """{test id: (outcome, message)} for the whole spec on one adapter, outside pytest.

    For testing the suite: a deliberately wrong adapter must produce "failed" somewhere.
    An exception from the adapter fails its tests, as under pytest; any other exception counts as "error".
    `dtypes` narrows the run (default: every dtype the spec runs this adapter in). `declared(test id)` gives a test's
    Divergence (or None): a convention or a bug leaves it out, a precision or a raise is judged by it (judged()).
    """
    results = {}
    for test in plan.tests(spec, {adapter_name: adapter}, dtypes):
        if test.not_applicable:
            results[test.id] = ("not applicable", "")
            continue
        divergence = declared(test.id) if declared else None
        if divergence is not None and divergence.unbounded:
            continue
        try:
            judged(spec, adapter_name, adapter, test.case, test.output, test.dtype, goldens, divergence)
            results[test.id] = ("passed", "")
        except Nonconformance as exc:
            results[test.id] = ("failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - any crash is a caught bug, and is reported as one
            results[test.id] = ("error", f"{type(exc).__name__}: {exc}")
    return results
