"""The plan: which tests a spec defines for a set of adapters, and the one test-id format.

A test is one output of one case, on one adapter, in one dtype; its id reads
`test_<output>[<adapter>-<dtype>-<case>]`, so `-k "torch and scores"` selects what it says.
Everything that enumerates tests (pytest, the wrong-adapter runs, reports, the matrix) asks here.
"""

import fnmatch
import re
from dataclasses import dataclass

NODE_PATH = "attention_conformance/conformance.py"  # a test's node id file part, wherever the package is installed
_ID = re.compile(r"test_(\w+)\[(.+)-(\w+)-([a-z0-9_]+)\]")


@dataclass(frozen=True)
class Test:
    adapter: str
    dtype: str
    case: object  # loader.Case
    output: str
    not_applicable: str = None  # the adapter's reason it cannot run this, shown as a skip

    @property
    def id(self):
        return test_id(self.output, self.adapter, self.dtype, self.case.id)

    @property
    def param_id(self):
        """The part in brackets: pytest's parametrization id."""
        return f"{self.adapter}-{self.dtype}-{self.case.id}"


def test_id(output, adapter, dtype, case_id):
    return f"test_{output}[{adapter}-{dtype}-{case_id}]"


def parse(test_id):
    """(output, adapter, dtype, case id) of a test id, or None if it is not one."""
    match = _ID.fullmatch(test_id)
    return match.groups() if match else None


DECLARED = re.compile(r"[a-z0-9_*]+(/[a-z0-9_*]+(/[a-z0-9*]+)?)?")  # case[/output[/dtype]], "*" for any text


def declared_pattern(adapter, key):
    """The test-id pattern of an adapter's own KNOWN_DIVERGENCES key 'case[/output[/dtype]]'."""
    case, output, dtype = (key.split("/") + ["*", "*"])[:3]
    return test_id(output, adapter, dtype, case)


def declared_key(pattern):
    """The adapter-declared key 'case/output/dtype' of a test-id pattern: declared_pattern's inverse."""
    output, _, dtype, case = re.fullmatch(r"test_([\w*]+)\[(.+)-([\w*]+)-([\w*]+)\]", pattern).groups()
    return f"{case}/{output}/{dtype}"


GENERATED = "fuzz_"  # a generated case's id is fuzz_<op>; no spec case's first word may be "fuzz"


def generated_case(op):
    """The case id fuzz judges a generated case of `op` under, so a divergence can name the op's
    generated cases only (e.g. test_weights[mlx-float16-fuzz_softmax]); spec runs never plan it."""
    return GENERATED + op


def generated_op(pattern):
    """The op a generated-case divergence names ("*" any), or None for a spec-case one."""
    case = pattern.rstrip("]").rsplit("-", 1)[-1] if "[" in pattern else ""
    return case.removeprefix(GENERATED) if case.startswith(GENERATED) else None


def names_an_op(pattern, ops):
    """Whether a generated-case divergence's op (with its "*") matches one of `ops`."""
    op = generated_op(pattern)
    return op is not None and any(fnmatch.fnmatchcase(name, op) for name in ops)


def misnamed_generated(patterns, ops):
    """The generated-case divergences among `patterns` whose fuzz_<op> names none of `ops` (a typo)."""
    return [p for p in patterns if generated_op(p) is not None and not names_an_op(p, ops)]


def adapter_of(pattern):
    """The adapter a test id, or a known-divergence pattern with "*" in it, is about."""
    return pattern[pattern.index("[") + 1 :].split("-")[0] if "[" in pattern else None


def dtypes_for(spec, adapter):
    """The adapter's own first dtype, then the spec's sweep of other dtypes (those the adapter does not
    declare are planned too, each test not applicable with that reason)."""
    primary = adapter.DTYPES[0]
    return [primary] + [d for d in spec.dtypes["sweep"] if d != primary]


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
    from attention_conformance.fields import FIELDS

    computed = any(FIELDS[name].computed for name in exp.given)
    return case.op in spec.dtypes["ops"] and case.sweep and computed


NOT_APPLICABLE_KEY = re.compile(r"([a-z0-9_]+)(/([a-z0-9_]+))?|([a-z_]+)=([a-z0-9_]+)")  # name[/output] or param=value


def not_applicable(adapter, case, dtype, output=None):
    """The adapter's stated reason this output of this case cannot run in this dtype, or None.
    NOT_APPLICABLE keys: a dtype, an op or a case id (everything it covers), "op/output" or
    "case/output" (that output only: a path that returns no attention weights), or "param=value"
    (every case whose input `param` is `value`: an adapter whose only layer is GPT-2's says "layer=mha")."""
    reasons = getattr(adapter, "NOT_APPLICABLE", {})
    reason = next((reasons[k] for k in _keys(case, dtype, output) if k in reasons), None)
    if reason is None and not hasattr(adapter, case.op):  # an optional op the adapter leaves out
        reason = f"the adapter does not define {case.op}() (optional)"
    if reason is None and dtype not in adapter.DTYPES:
        reason = f"{dtype} is not in the adapter's DTYPES"
    return reason


def parameter_key(name, value):
    """The NOT_APPLICABLE key "name=value" for an input value, true/false as YAML writes them."""
    return f"{name}={str(value).lower() if isinstance(value, bool) else value}"


def _keys(case, dtype, output=None):
    """Every NOT_APPLICABLE key that covers this case in this dtype (and this output, if given)."""
    return keys_of(case.op, [case.id], case.inputs, dtype, output)


def keys_of(op, case_ids, inputs, dtype, output=None):
    """Every NOT_APPLICABLE key that covers a case of `op` with these inputs, known by these spec case
    ids (none for a generated case, or the spec cases it stands with), in this dtype and output."""
    keys = [dtype, op, *case_ids] + ([f"{op}/{output}"] + [f"{i}/{output}" for i in case_ids] if output else [])
    return keys + [
        parameter_key(name, value)
        for name, value in inputs.items()
        if isinstance(value, (str, int)) and "#" not in str(value)
    ]  # words, switches, counts; not golden refs


def unmatched_not_applicable(spec, adapter):
    """The adapter's NOT_APPLICABLE keys that name nothing in this spec: a typo, or a renamed case."""
    from attention_conformance.contract import DTYPES

    named = {key for case in spec.cases.values() for output in case.expect for key in _keys(case, DTYPES[0], output)}
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
