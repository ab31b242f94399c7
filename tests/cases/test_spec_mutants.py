"""Fuzzing the spec and its goldens (cases/loader.py, cases/golden.py): structural mutants of the real spec and
goldens, and random wrong adapter outputs.

Every spec or golden mutant is either accepted (and its changed cases then run cleanly on the
reference: a pass, a Nonconformance, or an error raised inside the adapter itself), or refused
by `python -m spec` with exit 1 and exactly one line naming the file; never a traceback, never
more than 300 MiB, never a hang. How fast a refusal is (2 s) is a benchmark row, not a test. Every
wrong output is a Nonconformance, never another exception.
Under tox's "ci" profile the examples are the same every run.
"""

import contextlib
import copy
import io
import json
import os
import resource
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import hypothesis_profiles  # noqa: F401 - the ci/dev profiles, loaded before any @given
import numpy as np
import pytest
import yaml
from golden_files import copy_goldens, resign
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from spec_samples import Garbage

from attention_conformance import cli, safe_io
from attention_conformance.adapters import reference
from attention_conformance.cases import golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.paths import SPEC_DIR
from attention_conformance.run import calls, oracle_cache
from attention_conformance.run.verify import verify
from attention_conformance.tools.benchmark import alias_bomb

SPEC_TEXT = (SPEC_DIR / "attention.yaml").read_text()
SPEC_DATA = safe_io.load_yaml(SPEC_TEXT)
GOLDEN_FILES = sorted(p.name for p in golden.GOLDEN_DIR.glob("*.json") if p.name != golden.MANIFEST)
MAX_MIB = 300
# A hang guard, in CPU time (load does not change it): over 10x the slowest validation measured
# over the fuzzed mutants (0.13 s; the real spec 0.06 s; Xeon 2.8 GHz, AVX-512). Speed is `attention-conformance
# benchmark`'s "refusals" row.
HANG_GUARD_CPU_S = 10.0
FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# What a hostile value can be: each kind of wrong the validator or the parser must name.
hostile_values = st.one_of(
    st.sampled_from(
        [
            10**400,
            -(10**40),
            1e300,
            -1e39,
            1e-320,
            -0.0,
            float("nan"),
            float("inf"),
            0,
            -1,
            2**31,
            2**64,
            True,
            None,
            "",
            "1.0",
            "sat cat",
            "x.json#t",
            "../../etc/passwd#x",
            [],
            {},
            [[1.0], [1.0, 2.0]],
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-2, 2, width=32),  # a valid number in the wrong place: most such mutants are accepted and must run
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=20),
    st.lists(st.floats(-10, 10), max_size=4),
)


class Mutant(str):
    """A mutated file's text whose repr is the recipe: hypothesis prints that, not 40 kB of YAML."""

    def __new__(cls, text, recipe):
        made = super().__new__(cls, text)
        made.recipe = recipe
        return made

    def __repr__(self):
        return f"Mutant({self.recipe})"


def _paths(node, prefix=()):
    """Every (path, value) in a parsed document, containers included."""
    yield prefix, node
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from _paths(child, prefix + (key,))


def _at(root, path):
    for key in path:
        root = root[key]
    return root


@st.composite
def structural_mutant(draw, base):
    """`base` (parsed) with 1-3 edits: a field dropped, duplicated, retyped, or a value swapped for a hostile one."""
    data, recipe = copy.deepcopy(base), []
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _at(data, path[:-1]), path[-1]
        action = draw(st.sampled_from(["drop", "duplicate", "retype", "hostile", "hostile", "rename"]))
        recipe.append((action, path))
        if action == "drop":
            del parent[key]
        elif action == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif action == "duplicate":
            parent[f"{key}_copy"] = copy.deepcopy(parent[key])
        elif action == "retype":
            value = parent[key]
            parent[key] = [value] if not isinstance(value, list) else (value[0] if value else {})
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = parent.pop(key)
        else:
            parent[key] = draw(hostile_values)
            recipe[-1] += (repr(parent[key])[:60],)
    return data, recipe


@st.composite
def spec_mutant(draw):
    """The text of a mutated attention.yaml: structural edits, an alias bomb, or a truncation."""
    kind = draw(st.sampled_from(["structural", "structural", "structural", "bomb", "truncate"]))
    if kind == "structural":
        data, recipe = draw(structural_mutant(SPEC_DATA))
        return Mutant(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), recipe)
    if kind == "bomb":
        levels, width = draw(st.integers(1, 12)), draw(st.integers(2, 12))
        anchor = draw(st.sampled_from(["inputs: *seed123", "inputs: *seed789", "w_key: *eye3"]))
        replacement = (
            f"inputs: {{x: {alias_bomb(levels, width)}}}"
            if anchor.startswith("inputs")
            else f"w_key: {alias_bomb(levels, width)}"
        )
        return Mutant(SPEC_TEXT.replace(anchor, replacement, 1), ("bomb", anchor, levels, width))
    cut = draw(st.integers(0, len(SPEC_TEXT) - 1))
    return Mutant(SPEC_TEXT[:cut], ("truncated at", cut))


@contextlib.contextmanager
def _address_space(extra_mib):
    """Cap this process's address space at what it holds now plus `extra_mib` for the block: an
    allocation past it raises MemoryError. Cheap, unlike tracing every allocation."""
    now = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (now + extra_mib * 2**20, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _validate(path, golden_dir=golden.GOLDEN_DIR):
    """`attention-conformance validate`, in this process, within MAX_MIB more memory: (exit code,
    stdout, stderr, CPU seconds)."""
    out, err = io.StringIO(), io.StringIO()
    start = time.process_time()
    with _address_space(MAX_MIB), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["validate", str(path), "--golden-dir", str(golden_dir)])
    return code, out.getvalue(), err.getvalue(), time.process_time() - start


def test_the_memory_bound_bites():
    with pytest.raises(MemoryError):
        with _address_space(MAX_MIB):
            np.ones(2 * MAX_MIB * 2**20 // 8)


def _assert_accepted_or_refused_in_one_line(code, out, err, cpu_seconds, *files):
    assert cpu_seconds < HANG_GUARD_CPU_S, cpu_seconds
    if code == 0:
        assert out.startswith("ok:") and not err
        event("accepted")
        return True
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert any(str(f) in lines[0] for f in files), lines[0]
    event("refused")
    return False


def _runs_cleanly(path):
    """Each case the mutant changed, on the reference in float64: a pass, a Nonconformance, or an
    error raised inside the adapter (pytest reports that as the adapter's failure). Anything raised
    by the suite's own code fails."""
    loaded, goldens = loader.load(path), golden.Goldens()
    for case in loaded.cases.values():
        if _same_case(case):
            continue
        calls.forget()  # outputs are cached by case id, and a mutant keeps the ids
        for output in case.expect:
            try:
                verify(loaded, "reference", reference, case, output, "float64", goldens)
            except Nonconformance:
                pass
            except Exception as exc:  # noqa: BLE001 - only the adapter may raise
                frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
                assert set(map(str, oracle_cache.sources(reference))) & set(frames), "".join(
                    traceback.format_exception(exc)
                )


_BASE = loader.load()


def _same_case(case):
    base = _BASE.cases.get(case.id)
    return base is not None and (base.op, base.inputs, base.expect) == (case.op, case.inputs, case.expect)


@FUZZ
@given(text=spec_mutant())
def test_spec_mutants_are_accepted_or_refused_in_one_line(text):
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "attention.yaml"
        path.write_text(text)
        result = _validate(path)
        if _assert_accepted_or_refused_in_one_line(*result, path, golden.GOLDEN_DIR):
            _runs_cleanly(path)


@st.composite
def golden_mutant(draw):
    """(file name, new bytes, re-sign the manifest?): the JSON mutated structurally or as text."""
    name = draw(st.sampled_from(GOLDEN_FILES))
    text = (golden.GOLDEN_DIR / name).read_text()
    kind = draw(st.sampled_from(["structural", "structural", "number", "truncate"]))
    if kind == "structural":
        data, recipe = draw(structural_mutant(json.loads(text)))
        new = json.dumps(data, allow_nan=True)  # NaN and Infinity as JSON's non-standard constants
    elif kind == "number":  # a literal JSON cannot otherwise carry: 1e400, 10**400, a float32 overflow
        start = text.index('"data": ') + len('"data": ')
        number = next(i for i in range(start, len(text)) if text[i] in "-0123456789")
        end = next(i for i in range(number, len(text)) if text[i] in ",]\n")
        literal = draw(st.sampled_from(["1e400", str(10**400), "-1e39", "9" * 5000, "1e-400", "0x10"]))
        new, recipe = text[:number] + literal + text[end:], ("number", literal[:20])
    else:
        cut = draw(st.integers(0, len(text) - 1))
        new, recipe = text[:cut], ("truncated at", cut)
    return name, Mutant(new, recipe), draw(st.booleans())


@FUZZ
@given(mutant=golden_mutant())
def test_golden_mutants_are_accepted_or_refused_in_one_line(mutant):
    name, data, re_sign = mutant
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "golden"
        copy_goldens(directory)
        (directory / name).write_text(data)
        if re_sign:  # past the hash, so the parser itself meets the mutant
            resign(directory, name)
        result = _validate(SPEC_DIR / "attention.yaml", directory)
        _assert_accepted_or_refused_in_one_line(*result, directory)


# Small cases only: the GPT-2-shaped ones make the reference, not the checker, the cost.
SMALL_CASES = [
    (c, o) for c in _BASE.cases.values() if not any(isinstance(v, dict) for v in c.inputs.values()) for o in c.expect
]


def _filled(shape, value, dtype):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN cast to int32 is part of the garbage
        return np.full(shape, value).astype(dtype)


wrong_arrays = st.one_of(
    st.builds(
        _filled,
        st.lists(st.integers(0, 7), max_size=3).map(tuple),
        st.sampled_from([np.nan, np.inf, -np.inf, 3e38, -0.0, 1e-45, 0.0, 1.0]),
        st.sampled_from([np.float16, np.float32, np.float64, np.int32, np.bool_, np.complex64]),
    ),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
    st.recursive(
        st.one_of(st.none(), st.text(max_size=4), st.floats(), st.integers(-(2**70), 2**70)),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
        max_leaves=8,
    ),
)


@settings(max_examples=200)
@given(
    case_output=st.sampled_from(SMALL_CASES),
    value=wrong_arrays,
    dtype=st.sampled_from(["float32", "float16", "float64"]),
)
def test_wrong_outputs_are_nonconformance_never_a_crash(case_output, value, dtype):
    case, output = case_output
    calls.forget()  # outputs are cached by adapter name and case id; every example is a new adapter
    try:
        verify(_BASE, "fuzzed", Garbage(value), case, output, dtype, golden.Goldens())
    except Nonconformance as exc:
        assert "\n" not in str(exc)
