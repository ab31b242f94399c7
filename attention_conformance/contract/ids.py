"""The one test-id format, and the patterns an adapter declares with: KNOWN_DIVERGENCES keys and
test-id patterns, generated-case names, NOT_APPLICABLE keys.

A test is one output of one case, on one adapter, in one dtype; its id reads
`test_<output>[<adapter>-<dtype>-<case>]`, so `-k "torch and scores"` selects what it says.
"""

import fnmatch
import re

NODE_PATH = "attention_conformance/conformance.py"  # a test's node id file part, wherever the package is installed
_ID = re.compile(r"test_(\w+)\[(.+)-(\w+)-([a-z0-9_]+)\]")


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
    # From the right: the dtype and the case never hold a "-", an installed adapter's entry-point name may.
    return pattern[pattern.index("[") + 1 :].rstrip("]").rsplit("-", 2)[0] if "[" in pattern else None


NOT_APPLICABLE_KEY = re.compile(r"([a-z0-9_]+)(/([a-z0-9_]+))?|([a-z_]+)=([a-z0-9_]+)")  # name[/output] or param=value


def parameter_key(name, value):
    """The NOT_APPLICABLE key "name=value" for an input value, true/false as YAML writes them."""
    return f"{name}={str(value).lower() if isinstance(value, bool) else value}"


def family_keyword(family):
    """A family as one `-k` word: "rotary embeddings" -> "rotary_embeddings", "soft-capping" -> "soft_capping"."""
    return re.sub(r"[^a-z0-9]+", "_", family.lower()).strip("_")
