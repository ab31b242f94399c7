"""The plan: which tests a spec defines for a set of adapters, and which of them an adapter says it
cannot run (NOT_APPLICABLE). Everything that enumerates a spec's tests (pytest, the wrong-adapter runs,
check, the benchmark) asks here; a test's id is contract/ids.py's.
"""

from dataclasses import dataclass

from attention_conformance.cases.fields import FIELDS
from attention_conformance.contract import ids
from attention_conformance.dtypes import DTYPES


@dataclass(frozen=True)
class Test:
    adapter: str
    dtype: str
    case: object  # loader.Case
    output: str
    not_applicable: str = None  # the adapter's reason it cannot run this, shown as a skip

    @property
    def id(self):
        return ids.test_id(self.output, self.adapter, self.dtype, self.case.id)

    @property
    def param_id(self):
        """The part in brackets: pytest's parametrization id."""
        return f"{self.adapter}-{self.dtype}-{self.case.id}"


def dtypes_for(spec, adapter):
    """The adapter's own first dtype, then the spec's sweep of other dtypes (those the adapter does not
    declare are planned too, each test not applicable with that reason). The sweep is of the dtypes beside float32,
    the spec's own: an adapter whose first dtype is another and that declares float32 sweeps it too (its float32
    tests were never planned: a silent skip)."""
    primary = adapter.DTYPES[0]
    swept = ("float32",) * ("float32" in adapter.DTYPES) + tuple(spec.dtypes["sweep"])
    return [primary] + [d for d in swept if d != primary]


def declared_dtypes(spec, adapter):
    """The dtypes an adapter runs: what the header, the report and the matrix's columns show."""
    return [d for d in dtypes_for(spec, adapter) if d in adapter.DTYPES]


def applies(spec, case, exp, dtype, primary):
    """Every expectation is verified in an adapter's first dtype; the sweep repeats those of the forward
    ops that compare with computed values (fields.py: golden, reference, agreement, row sums) in the other
    dtypes. Printed numbers and exact facts are float32 statements and stay there. A case with
    `sweep: false` stays in the first dtype."""
    if dtype == primary:
        return True
    computed = any(FIELDS[name].computed for name in exp.given)
    return case.op in spec.dtypes["ops"] and case.sweep and computed


def not_applicable(adapter, case, dtype, output=None):
    """The adapter's stated reason this output of this case cannot run in this dtype, or None.
    NOT_APPLICABLE keys: a dtype, an op or a case id (everything it covers), "op/output" or
    "case/output" (that output only: a path that returns no attention weights), "op/dtype" or "case/dtype" (an
    operator defined for other dtypes only), or "param=value"
    (every case whose input `param` is `value`: an adapter whose only layer is GPT-2's says "layer=mha")."""
    reasons = getattr(adapter, "NOT_APPLICABLE", {})
    return next((reasons[k] for k in _keys(case, dtype, output) if k in reasons), None) or undeclared(
        adapter, case.op, dtype
    )


def undeclared(adapter, op, dtype):
    """Why the adapter cannot run `op` in `dtype` by what it defines, or None: an optional op it leaves out, or a
    dtype not in its DTYPES. For spec cases (above) and generated ones (fuzz, the sweep) alike."""
    if not hasattr(adapter, op):
        return f"the adapter does not define {op}() (optional)"
    if dtype not in adapter.DTYPES:
        return f"{dtype} is not in the adapter's DTYPES"
    return None


def _keys(case, dtype, output=None):
    """Every NOT_APPLICABLE key that covers this case in this dtype (and this output, if given)."""
    return keys_of(case.op, [case.id], case.inputs, dtype, output)


def keys_of(op, case_ids, inputs, dtype, output=None):
    """Every NOT_APPLICABLE key that covers a case of `op` with these inputs, known by these spec case
    ids (none for a generated case, or the spec cases it stands with), in this dtype and output."""
    keys = [dtype, op, *case_ids, f"{op}/{dtype}", *(f"{i}/{dtype}" for i in case_ids)]
    keys += [f"{op}/{output}"] + [f"{i}/{output}" for i in case_ids] if output else []
    return keys + [
        ids.parameter_key(name, value)
        for name, value in inputs.items()
        if isinstance(value, (str, int)) and "#" not in str(value)
    ]  # words, switches, counts; not golden refs


def unmatched_not_applicable(spec, adapter):
    """The adapter's NOT_APPLICABLE keys that name nothing in this spec: a typo, or a renamed case."""
    named = {
        key for case in spec.cases.values() for output in case.expect for d in DTYPES for key in _keys(case, d, output)
    }
    return sorted(k for k in getattr(adapter, "NOT_APPLICABLE", {}) if k not in named | set(DTYPES))


def tests(spec, adapters, dtypes=None):
    """Every test the spec defines for {name: adapter module}, ordered by adapter, dtype, case, output
    (a case's outputs share one call). `dtypes` narrows the run."""
    planned = []
    for name, adapter in adapters.items():
        for dtype in dtypes or dtypes_for(spec, adapter):
            for case in spec.cases.values():
                planned += [
                    Test(name, dtype, case, output, not_applicable(adapter, case, dtype, output))
                    for output, exp in case.expect.items()
                    if applies(spec, case, exp, dtype, adapter.DTYPES[0])
                ]
    return planned
