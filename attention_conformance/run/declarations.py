"""A run's account of its declared divergences (cases/divergences.py): the one each test takes, and at the end of a
complete run, those that no longer hold. What a declaration does to a test's verdict is verify.judged's."""

from attention_conformance.cases import divergences
from attention_conformance.contract import ids, ops


class Contradiction(ValueError):
    """A test two facts cover: they would say two things of its numbers."""


def one_for(test_id, declared):
    """The Divergence a test takes, or None; Contradiction where two facts cover it. A convention judged on its side
    takes a precision covering the test too: its side is computed at that accuracy (JAX's float64 fused attention)."""
    found = divergences.covering(test_id, declared)
    precisions = [d for d in found if d.kind == "precision"]
    found = [d for d in found if d.kind != "precision"] or found  # another kind says what the test is
    if len(found) > 1:
        raise Contradiction(
            f"{test_id} is covered by two declared divergences, {found[0].fact!r} ({found[0].source}) and "
            f"{found[1].fact!r} ({found[1].source}): they say two things of its numbers; leave it to one (an "
            "except: in the other)"
        )
    if found and found[0].kind == "convention" and found[0].bounded and precisions:
        return found[0].beside(precisions[0])
    return found[0] if found else None


def stale(declared, columns, expected, results):
    """The lines that fail a complete run: patterns of the `columns` run that match no test of `expected` (a
    generated case's aside: no spec test to match), and precisions that no test needed (every test they judged
    conforms at its own dtype: the fact no longer holds). `results`: {column: {test id: result}}."""

    def matched(pattern):
        return ids.names_an_op(pattern, ops.OPS) or any(divergences.matches(pattern, t) for t in expected)

    ours = {p: d for p, d in declared.items() if ids.adapter_of(p) in columns}
    unmatched = sorted({(p, d.source) for p, d in ours.items() if not matched(p)})
    unmatched += sorted({(e, d.source) for d in ours.values() for e in d.excepted if not matched(e)})
    needed = {}
    for result in (r for found in results.values() for r in found.values()):
        said = result.get("declared") or {}
        said = said.get("precision") or said  # a convention's side judged at a precision covering it too
        if said.get("kind") == "precision":
            key = (said["fact"], said["source"])
            needed[key] = needed.get(key, False) or said.get("needed", True) or result["outcome"] != "passed"
    unneeded = sorted(key for key, was in needed.items() if not was)
    return [
        "FAILED: known divergences that match no test (renamed or fixed?): "
        + ", ".join(f"{p} (in {source})" for p, source in unmatched)
    ] * bool(unmatched) + [
        "FAILED: declared precisions that no test needed (every test they cover conforms at its own dtype): "
        + ", ".join(f"{fact} (in {source})" for fact, source in unneeded)
    ] * bool(unneeded)
