"""Known divergences: what an adapter is expected to do differently, each entry one fact of one of the KINDS, with
its reason and the test-id patterns it covers; spec/divergences/<adapter>.yaml holds a built-in adapter's, an
adapter's KNOWN_DIVERGENCES its own, and `declared` is the one merge of the two that every command reads. What a
fact does to a test's verdict is run/verify.py's `judged`.
A pattern whose case is fuzz_<op> names fuzz's generated cases of that op alone (ids.generated_case)."""

import fnmatch
import functools
import re
from pathlib import Path

from attention_conformance import modes, sides
from attention_conformance.cases import loader, yaml_values
from attention_conformance.contract import ids
from attention_conformance.dtypes import DTYPES
from attention_conformance.paths import SPEC_DIR

FOLDER = SPEC_DIR / "divergences"  # <adapter>.yaml for each built-in adapter
BY_ADAPTER = " (declared by the adapter)"  # after the reason of an adapter's own KNOWN_DIVERGENCES entry


KINDS = {  # what each kind of declared divergence states; what it asks of its tests is run/verify.py's `judged`
    "precision": "computed at another dtype's accuracy inside",
    "raises": "the framework refuses the call",
    "convention": "the other side of a split the spec names",
    "bug": "an upstream defect, with its link",
}
_FIELDS = {
    "precision": {"computed_in", "sums_in_dtype", "within"},
    "raises": {"raises", "match"},
    "convention": {"side", "expect"},
    "bug": set(),
}
_COMMON = {"kind", "reason", "link", "modes", "tests", "except"}


def load(path, adapter=None):
    """{test-id pattern: Divergence} from a known-divergences file; each entry is a fact: its name, its kind, a
    reason, and `tests`, the test-id patterns it covers (`except`: those it does not); an entry keyed by a test id
    covers that one pattern (the first format, still read). An adapter's own file (<adapter>.yaml in a folder) holds
    that adapter's entries only."""
    path = Path(path)
    doc = loader.read(path)
    out = {}
    for name, entry in doc.items():
        at = f"{path}: entry {name!r}"
        if not isinstance(name, str) or not re.fullmatch(r"test_[\w*]*\[.+\]|[a-z0-9_]+", name):
            raise loader.SpecError(
                f"{at}: the key must be a fact's name (lower case, digits, _) or a test id like "
                "'test_scores[torch-float32-sat]'"
            )
        if not isinstance(entry, dict):
            raise loader.SpecError(
                f"{at}: a mapping with kind, reason and tests (`attention-conformance docs divergences`)"
            )
        keyed_by_id = name.startswith("test_")
        if keyed_by_id and "tests" in entry:
            raise loader.SpecError(f"{at}: field 'tests': an entry keyed by a test id covers that id alone")
        patterns = [name] if keyed_by_id else _patterns(entry.get("tests"), f"{at}: field 'tests'")
        excepted = _patterns(entry.get("except", []), f"{at}: field 'except'", empty=True)
        for pattern in patterns + excepted:
            if adapter is not None and modes.split(ids.adapter_of(pattern))[0] != adapter:
                raise loader.SpecError(
                    f"{at}: names adapter {ids.adapter_of(pattern)!r}; {path.name} holds {adapter!r}'s entries only"
                )
        divergence = parse(entry, at, name, str(path), first_format=keyed_by_id)
        divergence.excepted = tuple(excepted)
        twice = [p for p in patterns if p in out]
        if twice:  # one would hide the other: a mode's own fact names its column ("[tensorflow-compiled-")
            raise loader.SpecError(f"{at}: field 'tests': {twice[0]!r} is also entry {out[twice[0]].fact!r}'s")
        out.update(dict.fromkeys(patterns, divergence))
    return out


def _patterns(value, at, empty=False):
    if not (isinstance(value, list) and (value or empty)) or not all(
        isinstance(p, str) and p.startswith("test_") and "[" in p for p in value
    ):
        raise loader.SpecError(
            f"{at}: a list of test-id patterns like 'test_*[mlx-float64-*]' (\"*\" matches any text)"
        )
    return list(value)


def parse(entry, at, fact, source, first_format=False, suffix=""):
    """The Divergence an entry states, each field checked: `at` names the file (or adapter) and entry in a refusal.
    An entry of the first format (keyed by test id) without a kind is a bug, or a precision where it bounds."""
    if not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
        raise loader.SpecError(f"{at}: field 'reason': say why these tests differ")
    bounding = _FIELDS["precision"] & set(entry)
    kind = entry.get("kind", ("precision" if bounding else "bug") if first_format else None)
    if kind not in KINDS:
        said = "; ".join(f"{kind}: {meaning}" for kind, meaning in KINDS.items())
        raise loader.SpecError(f"{at}: field 'kind': one of {', '.join(KINDS)} ({said})")
    unknown = set(entry) - _COMMON - _FIELDS[kind]
    if unknown:
        allowed = ", ".join(sorted(_COMMON | _FIELDS[kind]))
        raise loader.SpecError(
            f"{at}: field {sorted(unknown)[0]!r}: not a field of a {kind} entry (allowed: {allowed})"
        )
    only = entry.get("modes")
    if only is not None and not (isinstance(only, list) and only and set(only) <= set(modes.MODES)):
        raise loader.SpecError(
            f"{at}: field 'modes': a list of the modes it holds in, from {', '.join(modes.MODES)} "
            "(without it, every mode the adapter runs)"
        )
    text = entry["reason"] + (f" ({entry['link']})" if entry.get("link") else "") + suffix
    divergence = Divergence(text, kind, fact, source)
    divergence.modes, divergence.stated = only, "kind" in entry
    if kind == "precision":
        _precision(divergence, entry, at)
    elif kind == "raises":
        _raises(divergence, entry, at)
    elif kind == "convention":
        _convention(divergence, entry, at)
    return divergence


def _precision(divergence, entry, at):
    computed_in, sums_in_dtype, within = (entry.get(f) for f in ("computed_in", "sums_in_dtype", "within"))
    if computed_in is None and sums_in_dtype is None and within is None:
        raise loader.SpecError(
            f"{at}: a precision entry names what it is judged at: computed_in (a dtype), sums_in_dtype: true, or "
            "within (a margin above 1)"
        )
    if computed_in is not None and computed_in not in DTYPES:
        raise loader.SpecError(f"{at}: field 'computed_in': one of {', '.join(DTYPES)}, the dtype computed inside")
    if sums_in_dtype is not None and sums_in_dtype is not True:
        raise loader.SpecError(f"{at}: field 'sums_in_dtype': true (the framework's sums accumulate in the dtype)")
    if within is not None and not (yaml_values.is_number(within) and within > 1):
        text = " (YAML reads 2.7e8 as text: write 2.7e+8)" if yaml_values.is_number_text(within) else ""
        raise loader.SpecError(f"{at}: field 'within': a number above 1 (the margin it may reach){text}")
    divergence.computed_in, divergence.sums_in_dtype, divergence.within = computed_in, bool(sums_in_dtype), within


def _raises(divergence, entry, at):
    raised, match = entry.get("raises"), entry.get("match")
    if not (isinstance(raised, str) and re.fullmatch(r"[A-Za-z_]\w*", raised)):
        raise loader.SpecError(f"{at}: field 'raises': the exception's class name, e.g. InvalidArgumentError")
    try:
        re.compile(match if isinstance(match, str) and match else "(")
    except re.error:
        raise loader.SpecError(
            f"{at}: field 'match': a regular expression its message must contain (re.search), e.g. 'Algorithm not "
            "supported'"
        ) from None
    divergence.raises, divergence.match = raised, match


# What a convention's own expectations may state: facts about the output as a whole (a layer's defaults, an
# initialiser's range), never a comparison with the oracle, whose other side is named by `side` instead.
STATEMENTS = ("equals", "in_range", "min_below", "mean", "zero_fraction", "note")


def _convention(divergence, entry, at):
    side, expect = entry.get("side"), entry.get("expect")
    if side is not None and sides.problem(side):
        raise loader.SpecError(f"{at}: field 'side': {sides.problem(side)}")
    if expect is not None:
        if not isinstance(expect, dict) or not expect:
            raise loader.SpecError(f"{at}: field 'expect': a mapping of an output to what it holds on this side")
        for output, raw in expect.items():
            unknown = set(raw) - set(STATEMENTS) if isinstance(raw, dict) else None
            if unknown:
                raise loader.SpecError(
                    f"{at}: field 'expect.{output}.{sorted(unknown)[0]}': a convention states {', '.join(STATEMENTS)} "
                    "(a computed side is `side`)"
                )
        expect = {output: loader.expectation(at, output, raw) for output, raw in expect.items()}
    divergence.side, divergence.expect = side, expect


class Divergence(str):
    """A declared divergence: its reason (the text), its `kind` (KINDS; `stated` False where the entry gave none and a
    bug is assumed), the `fact` it states (an entry's name) and the `source` that declares it. A precision's
    `computed_in`, `sums_in_dtype` and `within`; a raise's `raises` and `match`; `excepted`, the test-id patterns its
    fact leaves out; `modes`, those it holds in (None: every mode the adapter runs)."""

    def __new__(cls, text, kind="bug", fact=None, source=None):
        divergence = super().__new__(cls, text)
        divergence.kind, divergence.fact, divergence.source = kind, fact, source
        divergence.modes, divergence.excepted, divergence.stated = None, (), True
        divergence.computed_in, divergence.sums_in_dtype, divergence.within = None, False, None
        divergence.raises = divergence.match = divergence.side = divergence.expect = None
        divergence.precision = None  # a convention's: the precision covering its test too (beside)
        return divergence

    def beside(self, precision):
        """This convention with the precision that also covers a test: its side judged at that accuracy."""
        both = Divergence(self, self.kind, self.fact, self.source)
        both.__dict__.update(self.__dict__)
        both.precision = precision
        return both

    @property
    def bounded(self):
        """Whether its tests are still judged (a precision, a raise, a convention with its side or expectations):
        otherwise it excuses any result."""
        return self.kind in ("precision", "raises") or bool(self.kind == "convention" and (self.side or self.expect))

    @property
    def side_text(self):
        """A convention's side as a message says it: 'fully_masked_rows=nan', or its outputs' own expectations."""
        stated = [f"{output} as its entry states" for output in self.expect or {}]
        return "; ".join(filter(None, [sides.label(self.side), *stated]))

    @property
    def unbounded(self):
        return not self.bounded

    def judged_at(self, dtype):
        """The dtype whose accuracy a precision judges `dtype`'s results at."""
        return self.computed_in or dtype

    def said(self, dtype):
        """How a precision's allowance reads: 'float32 accuracy', 'the model summing in bfloat16, margin 3'."""
        parts = [f"{self.judged_at(dtype)} accuracy"] if self.computed_in else []
        parts += [f"the model summing in {dtype}"] if self.sums_in_dtype else []
        return ", ".join(parts + ([f"margin {self.within:g}"] if self.within is not None else []))

    def matches_raise(self, exc):
        """Whether `exc` is the raise declared: its class (or a base) of that name, its message matching."""
        names = {cls.__name__ for cls in type(exc).__mro__}
        return self.raises in names and re.search(self.match, f"{exc}") is not None

    def check(self, checked):
        """What a report keeps of it beside a test's outcome: its kind, its fact and what was checked."""
        # An entry that states no kind (a reason alone) reads, in the summary, as its case says: a convention or a bug.
        return {"kind": self.kind if self.stated else None, "fact": self.fact, "source": self.source, **checked}


def reason_for(test_id, declared):
    """The Divergence declared for a test, or None: the first fact whose pattern matches it and whose `except` does
    not, a precision only where no other kind covers it (covering). A "*" in an entry matches any text but the
    adapter's column: an entry for torch never covers torch-compiled's tests by its "*" (`declared` writes its own)."""
    found = covering(test_id, declared)
    return found[0] if found else None


def covering(test_id, declared):
    """Every Divergence declared for a test, one per fact, a precision last: a raise, a convention or a bug says
    what its call or its numbers are, and takes the test from a precision that also covers it (a broad "float64
    computed in float32" beside a fully masked row's NaN); two of those, or two precisions, contradict each other."""
    found = []
    for pattern, divergence in declared.items():
        if not any(divergence is f for f in found) and matches(pattern, test_id):
            if not any(_matcher(e)[1](test_id) for e in divergence.excepted):
                found.append(divergence)
    return sorted(found, key=lambda d: d.kind == "precision")


def matches(pattern, test_id):
    """Whether a test-id pattern covers a test (its column alone: see reason_for)."""
    of, match = _matcher(pattern)
    return of == ids.adapter_of(test_id) and match(test_id) is not None


@functools.lru_cache(maxsize=4096)
def _matcher(pattern):
    """(the pattern's column, its fnmatchcase as a compiled match): a run asks every entry of every test, 11 thousand
    times (0.8 s of a run's collection and end, measured under cProfile, issue 43)."""
    brackets_literal = pattern.replace("[", "[[]").replace("?", "[?]")
    return ids.adapter_of(pattern), re.compile(fnmatch.translate(brackets_literal)).match


def read(source=None):
    """{test-id pattern: Divergence} of a known-divergences file, or of every <adapter>.yaml in a folder
    (default: the built-in adapters', spec/divergences/): each entry checked, so a run refuses a bad one first."""
    source = Path(source or FOLDER)
    if source.is_dir():
        return {p: r for path in sorted(source.glob("*.yaml")) for p, r in load(path, path.stem).items()}
    return load(source)


def declared(name, adapter, source=None):
    """{test-id pattern: Divergence} the column `name` is known to diverge on: the entries for its adapter in `source`
    (a file; or a folder's <adapter>.yaml, default spec/divergences/) that hold in its mode, then the module's own
    KNOWN_DIVERGENCES (every mode, and those under its mode's name). An entry written for the adapter holds in
    every mode (a column of another mode gets it with its own name: "[torch-" becomes "[torch-compiled-") unless
    its modes: says which; one written for a column ("[torch-compiled-") holds in that column alone."""
    source, (base, named) = Path(source or FOLDER), modes.split(name)
    mode = getattr(adapter, "MODE", None) or named or next(iter(modes.declared(adapter)))
    if source.is_dir():
        own = source / f"{base}.yaml"
        found = load(own, base) if own.is_file() else {}
    else:
        found = {p: r for p, r in load(source).items() if modes.split(ids.adapter_of(p))[0] == base}

    def renamed(pattern):
        return pattern.replace(f"[{base}-", f"[{name}-", 1) if ids.adapter_of(pattern) == base else pattern

    # An entry keyed by a column ("[torch-compiled-") is that column's alone, as one with modes: [compiled] is.
    kept = {
        p: r
        for p, r in found.items()
        if (ids.adapter_of(p) == base and (r.modes is None or mode in r.modes)) or ids.adapter_of(p) == name != base
    }
    for divergence in {id(d): d for d in kept.values()}.values():  # by identity: two facts may give one reason
        divergence.excepted = tuple(map(renamed, divergence.excepted))
    found = {renamed(p): r for p, r in kept.items()}
    for key, entry in own_entries(adapter, mode):
        at = f"the adapter's KNOWN_DIVERGENCES, entry {key!r}"
        found.update(_own(name, key, entry, at))
    return found


def _own(name, key, entry, at):
    """{pattern: Divergence} of one KNOWN_DIVERGENCES entry: "key": "reason" (a bug, or a convention where the case
    states one), or "key": {"kind": ..., "reason": ...}, or "fact": {..., "tests": ["case/output/dtype", ...]}."""
    if isinstance(entry, Divergence):  # known_divergences(a built-in adapter): its kind and fields kept
        kept = Divergence(str(entry), entry.kind, key, entry.source)
        kept.__dict__.update({k: v for k, v in vars(entry).items() if k not in ("fact", "excepted")})
        kept.excepted = tuple(ids.declared_pattern(name, ids.declared_key(e)) for e in entry.excepted)
        return {ids.declared_pattern(name, key): kept}
    if isinstance(entry, str):
        entry = {"reason": entry}
    if not isinstance(entry, dict):
        raise loader.SpecError(f"{at}: the reason (text), or a dict with kind, reason and its kind's fields")
    tests = entry.get("tests", [key])
    keys = tests + list(entry.get("except", []))
    if not (isinstance(tests, list) and tests and all(isinstance(k, str) and ids.DECLARED.fullmatch(k) for k in keys)):
        raise loader.SpecError(f"{at}: field 'tests': a list of keys 'case[/output[/dtype]]' (\"*\" any text)")
    fields = {f: v for f, v in entry.items() if f not in ("tests", "except")}
    divergence = parse(fields, at, key, at, first_format="kind" not in entry, suffix=BY_ADAPTER)
    divergence.excepted = tuple(ids.declared_pattern(name, k) for k in entry.get("except", []))
    return {ids.declared_pattern(name, k): divergence for k in tests}


def own_entries(adapter, mode):
    """The adapter's KNOWN_DIVERGENCES that hold in `mode`: every entry, and those under the mode's own name
    ({"compiled": {"sat": "why"}})."""
    own = getattr(adapter, "KNOWN_DIVERGENCES", {})
    return [(k, v) for k, v in own.items() if k not in modes.MODES] + list(own.get(mode, {}).items())


def known_divergences(adapter):
    """A built-in adapter's known divergences, as an adapter declares its own: {'case/output/dtype': reason}, each
    reason a Divergence that keeps its kind (a precision stays judged, a raise checked).

    For an adapter that wraps or copies a built-in one, so it inherits what that framework is known
    to do differently: `KNOWN_DIVERGENCES = known_divergences("torch") | {"my_case": "why"}`.
    Both sources: spec/divergences/<adapter>.yaml's entries for it and the built-in module's own
    KNOWN_DIVERGENCES (reading those imports that adapter, and so its framework)."""
    import importlib

    from attention_conformance.contract import registry

    if adapter not in registry.NAMES:
        raise ValueError(f"known_divergences({adapter!r}): not a built-in adapter; one of {', '.join(registry.NAMES)}")
    module = importlib.import_module(registry.module_path(adapter))
    return {ids.declared_key(pattern): reason for pattern, reason in declared(adapter, module).items()}
