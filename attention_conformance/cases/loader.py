"""Loading a spec: YAML cases read in bounded time and memory, validated before anything runs.

Every error names the file, the case and the field in one line.
"""

import dataclasses
import math
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from attention_conformance import safe_io
from attention_conformance.cases import fields, input_rules, yaml_values
from attention_conformance.cases.input_values import GENERATED, MAX_ELEMENTS, MAX_TOKENS, SCALARS, offsets
from attention_conformance.contract import ids
from attention_conformance.contract.ops import OPS, PARAMETERS
from attention_conformance.dtypes import DTYPES, LOW_PRECISION
from attention_conformance.paths import SPEC_DIR

MAX_SPEC_BYTES = 1_000_000
ID = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")  # pytest's -k reads ids; brackets, spaces or dashes would break it
CASE_FIELDS = {"id", "family", "op", "inputs", "expect", "note", "erratum", "convention", "sweep"}
TOP_FIELDS = {"documents", "vocabulary", "families", "printed_rounding", "conventions", "dtypes", "tolerances", "cases"}


class SpecError(ValueError):
    def __init__(self, message):
        super().__init__(safe_io.one_line(message))


@dataclass(frozen=True)
class Tolerance:
    name: str
    reason: str
    by_dtype: dict  # dtype -> (atol, rtol)

    def bounds(self, dtype):
        return self.by_dtype[dtype]


# What the spec says about one output of a case: one attribute per field that fields.py declares (None
# where not given), and `given`, the names of the fields given.
Expectation = dataclasses.make_dataclass(
    "Expectation", [("output", str), ("given", tuple)] + [(name, object, None) for name in fields.FIELDS], frozen=True
)
Expectation.__module__ = __name__  # where pickle looks for it (make_dataclass says "types" on Python 3.11)


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    op: str
    inputs: dict
    expect: dict  # output name -> Expectation
    file: str
    note: str = ""
    erratum: dict = None
    convention: str = None  # the spec's convention this case states where the math has no answer
    sweep: bool = True  # false: the first dtype only, where the dtype sweep would repeat a large case


@dataclass(frozen=True)
class Spec:
    cases: dict  # id -> Case
    tolerances: dict  # name -> Tolerance
    documents: dict
    vocabulary: tuple
    families: tuple = ()  # matrix row groups, in order; every case names one
    conventions: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=lambda: {"sweep": [], "ops": []})


def read(path):
    try:
        text = safe_io.read_bounded(path, MAX_SPEC_BYTES, "a spec file").decode("utf-8")
    except safe_io.UnsafeInput as exc:
        raise SpecError(str(exc)) from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text") from None
    try:
        doc = safe_io.load_yaml(text)
    except safe_io.UnsafeInput as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).replace("\n", " ")
        raise SpecError(f"{path}: {where}not valid YAML: {problem}") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: top level must be a mapping with {sorted(TOP_FIELDS)}")
    return doc


def _tolerances(path, raw):
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"{path}: field 'tolerances': must be a mapping of named tolerances")
    out = {}
    for name, entry in raw.items():
        at = f"{path}: tolerance {name!r}"
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise SpecError(f"{at}: field 'reason': every tolerance says why it is what it is")
        by_dtype = {}
        for dtype, bounds in entry.items():
            if dtype == "reason":
                continue
            if dtype not in DTYPES:
                raise SpecError(f"{at}: field {dtype!r}: unknown key (expected reason or a dtype name)")
            keys = ("k", "ulps") if name == "low_precision" else ("atol", "rtol")
            if (
                not isinstance(bounds, dict)
                or set(bounds) != set(keys)
                or not all(yaml_values.is_number(v) and v >= 0 for v in bounds.values())
            ):
                raise SpecError(f"{at}: field {dtype!r}: must be {{{keys[0]}: number >= 0, {keys[1]}: number >= 0}}")
            by_dtype[dtype] = (float(bounds[keys[0]]), float(bounds[keys[1]]))
        out[name] = Tolerance(name, entry["reason"], by_dtype)
    return out


def _expectation(at, output, raw, ctx):
    def fail(sub, message):
        raise SpecError(f"{at}: field 'expect.{output}{'.' + sub if sub else ''}': {message}")

    if output not in ctx.outputs:
        fail("", f"this op returns {list(ctx.outputs)}, not {output!r}")
    if not isinstance(raw, dict):
        fail("", "must be a mapping")
    unknown = set(raw) - set(fields.FIELDS)
    if unknown:
        fail(sorted(unknown, key=str)[0], f"unknown key (allowed: {sorted(fields.FIELDS)})")
    if not any(fields.FIELDS[name].verify for name in raw):
        fail("", f"expects nothing (give one of {', '.join(name for name, f in fields.FIELDS.items() if f.verify)})")
    problem = fields.validate(raw, ctx)
    if problem:
        fail(*problem)
    given = dict(raw)
    if "tolerance" not in raw and any(fields.FIELDS[name].toleranced for name in raw):
        given["tolerance"] = "golden"
        if "golden" not in ctx.tolerances:
            fail("tolerance", "'golden' is not defined under 'tolerances'")
    return Expectation(output, tuple(given), **given)


def expectation(at, output, raw):
    """An expectation stated outside a case (a convention's own, cases/divergences.py), of any op's output."""
    outputs = {name for _, names in OPS.values() for name in names}
    return _expectation(at, output, raw, types.SimpleNamespace(outputs=sorted(outputs), documents={}, tolerances={}))


def _generated(at, name, value):
    kind = next((k for k in GENERATED if k in value), None)
    shape = value.get("shape")
    if isinstance(shape, list) and 0 in shape and all(yaml_values.is_int(n) for n in shape):
        raise SpecError(
            f"{at}: field 'inputs.{name}.shape': {shape} has a zero-sized axis {shape.index(0)}; "
            "every axis of a generated input needs at least 1 element"
        )
    if (
        kind is None
        or set(value) != GENERATED[kind]
        or not (isinstance(shape, list) and shape and all(yaml_values.is_int(n, 1, MAX_ELEMENTS) for n in shape))
    ):
        raise SpecError(
            f"{at}: field 'inputs.{name}': a generated input is {{fill: v, shape: [..]}} "
            "or {uniform: [low, high], shape: [..], seed: n}"
        )
    if math.prod(shape) > MAX_ELEMENTS:
        raise SpecError(
            f"{at}: field 'inputs.{name}.shape': {math.prod(shape)} elements is over the limit of {MAX_ELEMENTS}"
        )
    if kind == "fill" and not yaml_values.is_number(value["fill"]):
        raise SpecError(f"{at}: field 'inputs.{name}.fill': must be a finite float32 number")
    if kind == "uniform":
        bounds = value["uniform"]
        if not (
            isinstance(bounds, list)
            and len(bounds) == 2
            and all(map(yaml_values.is_number, bounds))
            and bounds[0] < bounds[1]
        ):
            raise SpecError(
                f"{at}: field 'inputs.{name}.uniform': must be [low, high], finite float32 numbers, low < high"
            )
        if not SCALARS["seed"][0](value["seed"]):
            raise SpecError(f"{at}: field 'inputs.{name}.seed': must be {SCALARS['seed'][1]}")
    return value


def _input(at, name, value):
    if name in SCALARS:
        valid, what = SCALARS[name]
        if not valid(value):
            raise SpecError(f"{at}: field 'inputs.{name}': {value!r} is not valid; must be {what}")
        return value
    if PARAMETERS.get(name) == "offsets":
        if not offsets(value):
            raise SpecError(
                f"{at}: field 'inputs.{name}': {value!r} is not valid; must be cumulative lengths: 0, then each "
                f"document's end, increasing, the last the token count (at most {MAX_TOKENS})"
            )
        return value
    if isinstance(value, dict):  # too big to write out: generated from a rule, identically everywhere
        return _generated(at, name, value)
    if isinstance(value, list) and yaml_values.bools(value):
        return value
    if PARAMETERS.get(name) == "sink" and isinstance(value, list) and value:  # -inf: a head without a sink
        if all(v == -math.inf or yaml_values.is_number(v) for v in value):
            return value
    if isinstance(value, str):
        if not yaml_values.GOLDEN_REF.fullmatch(value):
            raise SpecError(
                f"{at}: field 'inputs.{name}': golden reference {value!r} must be 'file.json#tensor' inside golden/"
            )
    elif not yaml_values.is_number(value) and yaml_values.shape_of(value) is None:
        raise SpecError(
            f"{at}: field 'inputs.{name}': must be a golden reference, a finite float32 number "
            "or a regular list of them"
        )
    return value


def load_file(path):
    path = Path(path)
    doc = read(path)
    unknown = set(doc) - TOP_FIELDS
    if unknown:
        raise SpecError(f"{path}: field {sorted(unknown)[0]!r}: unknown key (allowed: {sorted(TOP_FIELDS)})")
    missing = TOP_FIELDS - set(doc)
    if missing:
        raise SpecError(f"{path}: field {sorted(missing)[0]!r}: missing")
    documents = doc["documents"]
    if not isinstance(documents, dict) or not all(isinstance(v, str) for v in documents.values()):
        raise SpecError(f"{path}: field 'documents': must map a short name to a document file name")
    vocabulary = doc["vocabulary"]
    if not isinstance(vocabulary, list) or not all(
        isinstance(w, str) and re.fullmatch("[a-z0-9]+", w) for w in vocabulary
    ):
        raise SpecError(f"{path}: field 'vocabulary': must be a list of words of a-z and 0-9")
    families = doc["families"]
    if not (
        isinstance(families, list)
        and families
        and all(isinstance(f, str) and f.strip() for f in families)
        and len(set(families)) == len(families)
    ):
        raise SpecError(f"{path}: field 'families': must be a list of distinct row-group names for the matrix")
    if not isinstance(doc["conventions"], dict) or not all(
        isinstance(v, str) and v.strip() for v in doc["conventions"].values()
    ):
        raise SpecError(f"{path}: field 'conventions': must map a name to the convention, stated in words")
    tolerances = _tolerances(path, doc["tolerances"])
    dtypes = doc["dtypes"]
    if not (
        isinstance(dtypes, dict)
        and set(dtypes) == {"sweep", "ops", "reason"}
        and isinstance(dtypes["sweep"], list)
        and all(yaml_values.one_of(d, DTYPES) for d in dtypes["sweep"])
        and isinstance(dtypes["ops"], list)
        and all(yaml_values.one_of(op, OPS) for op in dtypes["ops"])
        and isinstance(dtypes["reason"], str)
    ):
        raise SpecError(f"{path}: field 'dtypes': must be {{sweep: [dtype names], ops: [op names], reason: why}}")
    if set(dtypes["sweep"]) & set(LOW_PRECISION) and "low_precision" not in tolerances:
        raise SpecError(f"{path}: field 'tolerances': a half-precision sweep needs a 'low_precision' tolerance")
    if not isinstance(doc["cases"], list) or not doc["cases"]:
        raise SpecError(f"{path}: field 'cases': must be a non-empty list")
    cases = {}
    for index, raw in enumerate(doc["cases"]):
        case_id = raw.get("id") if isinstance(raw, dict) else None
        at = f"{path}: case {case_id!r}" if isinstance(case_id, str) else f"{path}: case #{index + 1}"
        if not isinstance(raw, dict):
            raise SpecError(f"{at}: must be a mapping")
        unknown = set(raw) - CASE_FIELDS
        if unknown:
            raise SpecError(f"{at}: field {sorted(unknown)[0]!r}: unknown key (allowed: {sorted(CASE_FIELDS)})")
        for key in ("id", "family", "op", "inputs", "expect"):
            if key not in raw:
                raise SpecError(f"{at}: field {key!r}: missing")
        if not isinstance(case_id, str) or not ID.fullmatch(case_id):
            raise SpecError(f"{at}: field 'id': must be words of a-z and 0-9 joined by '_', like sat_by_hand")
        if case_id.startswith(ids.GENERATED):
            raise SpecError(f"{at}: field 'id': {ids.GENERATED}<op> names fuzz's generated cases; choose another")
        bad = [w for w in case_id.split("_") if w not in vocabulary]
        if bad:
            raise SpecError(f"{at}: field 'id': word {bad[0]!r} is not in the vocabulary")
        if case_id in cases:
            raise SpecError(f"{at}: field 'id': duplicate id")
        if not yaml_values.one_of(raw["family"], families):
            raise SpecError(f"{at}: field 'family': {raw['family']!r} is not one of the spec's families {families}")
        op = raw["op"]
        if not yaml_values.one_of(op, OPS):
            raise SpecError(f"{at}: field 'op': {op!r} is not one of {sorted(OPS)}")
        params, outputs = OPS[op]
        if not isinstance(raw["inputs"], dict) or set(raw["inputs"]) != set(params):
            raise SpecError(f"{at}: field 'inputs': {op} takes exactly {list(params)}")
        inputs = {name: _input(at, name, value) for name, value in raw["inputs"].items()}
        problem = input_rules.problem(op, inputs)
        if problem:
            raise SpecError(f"{at}: {problem}")
        if not isinstance(raw["expect"], dict) or not raw["expect"]:
            raise SpecError(f"{at}: field 'expect': must be a non-empty mapping of output name -> expectation")
        ctx = types.SimpleNamespace(outputs=outputs, documents=documents, tolerances=tolerances)
        expect = {out: _expectation(at, out, chk, ctx) for out, chk in raw["expect"].items()}
        erratum = raw.get("erratum")
        if erratum is not None and not (
            isinstance(erratum, dict)
            and set(erratum) == {"doc", "claim", "fact"}
            and yaml_values.one_of(erratum["doc"], documents)
            and all(isinstance(v, str) and v.strip() for v in erratum.values())
        ):
            raise SpecError(f"{at}: field 'erratum': must be {{doc, claim: the document's words, fact: what holds}}")
        convention = raw.get("convention")
        if convention is not None and not yaml_values.one_of(convention, doc["conventions"]):
            raise SpecError(
                f"{at}: field 'convention': {convention!r} is not one of the spec's conventions "
                f"{sorted(doc['conventions'])}"
            )
        sweep = raw.get("sweep", True)
        if not isinstance(sweep, bool):
            raise SpecError(f"{at}: field 'sweep': must be true or false")
        cases[case_id] = Case(
            case_id, raw["family"], op, inputs, expect, str(path), raw.get("note", ""), erratum, convention, sweep
        )
    return Spec(cases, tolerances, documents, tuple(vocabulary), tuple(families), doc["conventions"], dtypes)


def golden_references(loaded):
    """Every golden reference the spec uses, in inputs and expectations."""
    refs = set()
    for case in loaded.cases.values():
        refs |= {v for v in case.inputs.values() if isinstance(v, str) and "#" in v}
        refs |= {e.golden for e in case.expect.values() if e.golden}
    return sorted(refs)


def load(path=None):
    """The spec; by default the one file spec/attention.yaml."""
    return load_file(path or SPEC_DIR / "attention.yaml")
