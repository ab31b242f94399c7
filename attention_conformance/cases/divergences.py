"""Known divergences: what an adapter is expected to do differently, keyed by test-id pattern, each with its
reason; spec/divergences/<adapter>.yaml holds a built-in adapter's, an adapter's KNOWN_DIVERGENCES its own,
and `declared` is the one merge of the two that every command reads.
A pattern whose case is fuzz_<op> names fuzz's generated cases of that op alone (ids.generated_case)."""

import fnmatch
import functools
import re
from pathlib import Path

from attention_conformance import modes
from attention_conformance.cases import loader, yaml_values
from attention_conformance.contract import ids
from attention_conformance.paths import SPEC_DIR

FOLDER = SPEC_DIR / "divergences"  # <adapter>.yaml for each built-in adapter
BY_ADAPTER = " (declared by the adapter)"  # after the reason of an adapter's own KNOWN_DIVERGENCES entry


def load(path, adapter=None):
    """{test id: reason} from a known-divergences file; every entry must give a reason. An adapter's own
    file (<adapter>.yaml in a folder) holds that adapter's entries only."""
    path = Path(path)
    doc = loader.read(path)
    out = {}
    for test_id, entry in doc.items():
        at = f"{path}: entry {test_id!r}"
        if not (isinstance(test_id, str) and test_id.startswith("test_") and "[" in test_id):
            raise loader.SpecError(f"{at}: the key must be a test id like 'test_scores[torch-float32-sat]'")
        if adapter is not None and modes.split(ids.adapter_of(test_id))[0] != adapter:
            raise loader.SpecError(
                f"{at}: names adapter {ids.adapter_of(test_id)!r}; {path.name} holds {adapter!r}'s entries only"
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise loader.SpecError(f"{at}: field 'reason': say why this test is expected to fail")
        unknown = set(entry) - {"reason", "link", "within", "sums_in_dtype", "modes"}
        if unknown:
            raise loader.SpecError(
                f"{at}: field {sorted(unknown)[0]!r}: unknown key (allowed: link, modes, reason, sums_in_dtype, within)"
            )
        only = entry.get("modes")
        if only is not None and not (isinstance(only, list) and only and set(only) <= set(modes.MODES)):
            raise loader.SpecError(
                f"{at}: field 'modes': a list of the modes it holds in, from {', '.join(modes.MODES)} "
                "(without it, every mode the adapter runs)"
            )
        sums_in_dtype = entry.get("sums_in_dtype", False)
        if sums_in_dtype is not False and not (ids.generated_op(test_id) and sums_in_dtype is True):
            raise loader.SpecError(
                f"{at}: field 'sums_in_dtype': true (the framework's sums accumulate in the dtype), and only on a "
                f"generated case's entry (case fuzz_<op>)"
            )
        within = entry.get("within")
        if within is not None and not (ids.generated_op(test_id) and yaml_values.is_number(within) and within > 1):
            text = " (YAML reads 2.7e8 as text: write 2.7e+8)" if yaml_values.is_number_text(within) else ""
            raise loader.SpecError(
                f"{at}: field 'within': a number above 1 (the margin it may reach), and only on a generated "
                f"case's entry (case fuzz_<op>){text}"
            )
        text = entry["reason"] + (f" ({entry['link']})" if entry.get("link") else "")
        out[test_id] = Reason(text, within, sums_in_dtype, source=str(path), modes=only)
    return out


class Reason(str):
    """A known divergence's reason. On a generated case's entry, what fuzz still holds its results to:
    `within`, the margin they may reach; `sums_in_dtype`, the model with its sums in the dtype itself.
    Neither: any result, a raise included. `modes`: the modes it holds in (None: every one the adapter runs)."""

    def __new__(cls, text, within=None, sums_in_dtype=False, source=None, modes=None):
        reason = super().__new__(cls, text)
        reason.within, reason.sums_in_dtype, reason.source, reason.modes = within, sums_in_dtype, source, modes
        return reason

    @property
    def bounded(self):
        return self.within is not None or self.sums_in_dtype


def reason_for(test_id, declared):
    """The reason a test is a known divergence, or None. A "*" in an entry matches any text but the adapter's
    column: an entry for torch never covers torch-compiled's tests by its "*" (`declared` writes its own)."""
    column = ids.adapter_of(test_id)
    for pattern, reason in declared.items():
        of, match = _matcher(pattern)
        if of == column and match(test_id):
            return reason
    return None


@functools.lru_cache(maxsize=4096)
def _matcher(pattern):
    """(the pattern's column, its fnmatchcase as a compiled match): a run asks every entry of every test, 11 thousand
    times (0.8 s of a run's collection and end, measured under cProfile, issue 43)."""
    brackets_literal = pattern.replace("[", "[[]").replace("?", "[?]")
    return ids.adapter_of(pattern), re.compile(fnmatch.translate(brackets_literal)).match


def read(source=None):
    """{test-id pattern: Reason} of a known-divergences file, or of every <adapter>.yaml in a folder
    (default: the built-in adapters', spec/divergences/): each entry checked, so a run refuses a bad one first."""
    source = Path(source or FOLDER)
    if source.is_dir():
        return {p: r for path in sorted(source.glob("*.yaml")) for p, r in load(path, path.stem).items()}
    return load(source)


def declared(name, adapter, source=None):
    """{test-id pattern: Reason} the column `name` is known to diverge on: the entries for its adapter in `source`
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
    # An entry keyed by a column ("[torch-compiled-") is that column's alone, as one with modes: [compiled] is.
    found = {
        p.replace(f"[{base}-", f"[{name}-", 1) if ids.adapter_of(p) == base else p: r
        for p, r in found.items()
        if (ids.adapter_of(p) == base and (r.modes is None or mode in r.modes)) or ids.adapter_of(p) == name != base
    }
    for key, reason in own_entries(adapter, mode):
        found[ids.declared_pattern(name, key)] = Reason(
            reason + BY_ADAPTER, source=f"the adapter's KNOWN_DIVERGENCES, entry {key!r}"
        )
    return found


def own_entries(adapter, mode):
    """The adapter's KNOWN_DIVERGENCES that hold in `mode`: every entry, and those under the mode's own name
    ({"compiled": {"sat": "why"}})."""
    own = getattr(adapter, "KNOWN_DIVERGENCES", {})
    return [(k, v) for k, v in own.items() if k not in modes.MODES] + list(own.get(mode, {}).items())


def known_divergences(adapter):
    """A built-in adapter's known divergences, as an adapter declares its own: {'case/output/dtype': reason}.

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
