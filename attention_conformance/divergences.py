"""Known divergences: what an adapter is expected to do differently, keyed by test-id pattern, each with its
reason; spec/known_divergences.yaml holds the built-in adapters', an adapter's KNOWN_DIVERGENCES its own.
A pattern whose case is fuzz_<op> names fuzz's generated cases of that op alone (plan.generated_case)."""

import fnmatch
from pathlib import Path

from attention_conformance import SPEC_DIR, contract, loader, plan, values


def load(path):
    """{test id: reason} from a known-divergences file; every entry must give a reason."""
    path = Path(path)
    doc = loader.read(path)
    out = {}
    for test_id, entry in doc.items():
        at = f"{path}: entry {test_id!r}"
        if not (isinstance(test_id, str) and test_id.startswith("test_") and "[" in test_id):
            raise loader.SpecError(f"{at}: the key must be a test id like 'test_scores[torch-float32-sat]'")
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise loader.SpecError(f"{at}: field 'reason': say why this test is expected to fail")
        unknown = set(entry) - {"reason", "link", "within", "sums_in_dtype"}
        if unknown:
            raise loader.SpecError(
                f"{at}: field {sorted(unknown)[0]!r}: unknown key (allowed: link, reason, sums_in_dtype, within)"
            )
        sums_in_dtype = entry.get("sums_in_dtype", False)
        if sums_in_dtype is not False and not (plan.generated_op(test_id) and sums_in_dtype is True):
            raise loader.SpecError(
                f"{at}: field 'sums_in_dtype': true (the framework's sums accumulate in the dtype), and only on a "
                f"generated case's entry (case fuzz_<op>)"
            )
        within = entry.get("within")
        if within is not None and not (plan.generated_op(test_id) and values.is_number(within) and within > 1):
            text = " (YAML reads 2.7e8 as text: write 2.7e+8)" if values.is_number_text(within) else ""
            raise loader.SpecError(
                f"{at}: field 'within': a number above 1 (the margin it may reach), and only on a generated "
                f"case's entry (case fuzz_<op>){text}"
            )
        text = entry["reason"] + (f" ({entry['link']})" if entry.get("link") else "")
        out[test_id] = Reason(text, within, sums_in_dtype)
    return out


class Reason(str):
    """A known divergence's reason. On a generated case's entry, what fuzz still holds its results to:
    `within`, the margin they may reach; `sums_in_dtype`, the model with its sums in the dtype itself.
    Neither: any result, a raise included."""

    def __new__(cls, text, within=None, sums_in_dtype=False):
        reason = super().__new__(cls, text)
        reason.within, reason.sums_in_dtype = within, sums_in_dtype
        return reason

    @property
    def bounded(self):
        return self.within is not None or self.sums_in_dtype


def reason_for(test_id, declared):
    """The reason a test is a known divergence, or None. A "*" in an entry matches any text."""
    for pattern, reason in declared.items():
        if fnmatch.fnmatchcase(test_id, pattern.replace("[", "[[]").replace("?", "[?]")):
            return reason
    return None


def declared(name, adapter):
    """{test-id pattern: reason} an adapter is known to diverge on: spec/known_divergences.yaml's for a
    built-in adapter, and the module's own KNOWN_DIVERGENCES."""
    found = {}
    if name in contract.NAMES:
        found = {p: r for p, r in load(SPEC_DIR / "known_divergences.yaml").items() if plan.adapter_of(p) == name}
    for key, reason in getattr(adapter, "KNOWN_DIVERGENCES", {}).items():
        found[plan.declared_pattern(name, key)] = reason
    return found
