"""The adapter registry: which adapters exist (the files in adapters/, an installed package's entry
point, any importable module), importing one, and every way a module breaks the contract (ops.py).
Importing this module imports no framework."""

import importlib
import importlib.metadata
import inspect
import sys
import types

from attention_conformance import modes
from attention_conformance.contract import ids
from attention_conformance.contract.ops import CHOICES, CONTRACT, OPS, OPTIONAL, PARAMETERS
from attention_conformance.dtypes import DTYPES
from attention_conformance.paths import ADAPTERS_DIR

# A built-in adapter is a file, or a package (one module per family) once it outgrows one.
NAMES = tuple(
    sorted(
        name
        for name in [p.stem for p in ADAPTERS_DIR.glob("*.py")]
        + [p.parent.name for p in ADAPTERS_DIR.glob("*/__init__.py")]
        if not name.startswith("_")
    )
)
ENTRY_POINT_GROUP = "attention_conformance.adapters"


class AdapterError(Exception):
    pass


def ask(name, module, function, kind, absent=None):
    """version() or devices() (`absent` where the adapter defines none): an adapter that raises or answers nonsense
    is refused (AdapterError: exit 4), never an INTERNALERROR."""
    if absent is not None and not hasattr(module, function):
        return absent
    try:
        answer = getattr(module, function)()
    except Exception as exc:  # noqa: BLE001 - whatever the adapter does is reported, not propagated
        said = f"raises {type(exc).__name__}: {exc}"
    else:
        if isinstance(answer, kind) and answer:
            return answer
        said = f"returned {answer!r}"
    raise AdapterError(f"adapter {name!r}: {function}() {said}; run `attention-conformance check {name}`")


def module_path(name):
    """The module to import for an adapter name: a built-in adapter, an installed package's entry
    point in the group attention_conformance.adapters, or the name itself as a dotted module path."""
    if name in NAMES:
        return f"attention_conformance.adapters.{name}"
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return entry.value
    return name


def sources(name):
    """A built-in adapter's source files: its file, or every module of its package (the face first)."""
    if (ADAPTERS_DIR / f"{name}.py").is_file():
        return [ADAPTERS_DIR / f"{name}.py"]
    package = ADAPTERS_DIR / name
    return [package / "__init__.py", *sorted(p for p in package.glob("*.py") if p.name != "__init__.py")]


REST = "*"  # NOT_APPLICABLE's key for every op the module does not define


def declare_rest(module):
    """NOT_APPLICABLE's "*" written out as one key per op the module does not define, with its reason, so that every
    stage after the import reads the keys it always reads. A newcomer's adapter is then the functions it has and one
    line, not thirty stubs; a function left out without "*" is still a broken contract (a typo is never a skip)."""
    reasons = getattr(module, "NOT_APPLICABLE", None)
    why = reasons.get(REST) if isinstance(reasons, dict) else None
    if isinstance(why, str) and why.strip():
        rest = {op: why for op in OPS if not callable(getattr(module, op, None))}
        module.NOT_APPLICABLE = rest | {k: v for k, v in reasons.items() if k != REST}


def contract_problems(module):
    """Every way `module` breaks the contract, one readable line each."""
    problems = []
    dtypes = getattr(module, "DTYPES", None)
    if not (isinstance(dtypes, tuple) and dtypes and all(d in DTYPES for d in dtypes)):
        problems.append(f"DTYPES must be a non-empty tuple of dtype names from {DTYPES}, e.g. ('float32',)")
    mode_problems = _modes_problems(module)
    problems += mode_problems
    not_applicable = getattr(module, "NOT_APPLICABLE", {})
    # A mode's own keys sit under its name: {"compiled": {key: reason}}.
    by_mode = {k: v for k, v in not_applicable.items() if k in modes.MODES} if isinstance(not_applicable, dict) else {}
    shared = {k: v for k, v in not_applicable.items() if k not in by_mode} if isinstance(not_applicable, dict) else {}
    nested = [k for k, v in shared.items() if isinstance(v, dict)]
    if nested:
        problems.append(
            f"NOT_APPLICABLE key {nested[0]!r} holds a map, which only a mode may: {', '.join(modes.MODES)}"
        )
    elif not (isinstance(not_applicable, dict) and _reasons(shared) and all(map(_reasons, by_mode.values()))):
        problems.append(
            "NOT_APPLICABLE must map a key to the reason it cannot run, e.g. {'float64': 'float32 only'}, and a mode "
            "of MODES to such a map for that mode alone, e.g. {'compiled': {'sgd_step': 'the compiler refuses ...'}}"
        )
    else:
        problems += [
            f"NOT_APPLICABLE names mode {m!r}, which MODES does not declare"
            for m in by_mode
            if not mode_problems and m not in modes.declared(module)
        ]
        problems += [
            f"NOT_APPLICABLE key {key!r}{f' (mode {mode})' if mode else ''}: {problem}"
            for mode, keys in [(None, shared), *by_mode.items()]
            for key in keys
            for problem in [not_applicable_key_problem(key)]
            if problem
        ]
    declared = getattr(module, "KNOWN_DIVERGENCES", {})
    entries = (
        [(k, v) for k, v in declared.items() if k not in modes.MODES]
        + [e for k, v in declared.items() if k in modes.MODES and isinstance(v, dict) for e in v.items()]
        if isinstance(declared, dict)
        else []
    )
    if not (
        isinstance(declared, dict)
        and all(isinstance(v, dict) for k, v in declared.items() if k in modes.MODES)
        and all(  # a dict's fields are checked where it is read (cases/divergences.py), each named there
            isinstance(k, str)
            and ids.DECLARED.fullmatch(k)
            and (isinstance(v, dict) or (isinstance(v, str) and v.strip()))
            for k, v in entries
        )
    ):
        problems.append(
            "KNOWN_DIVERGENCES must map 'case[/output[/dtype]]' (\"*\" for any text) to the reason, with a link where "
            "one exists, e.g. {'padding_fully_masked': 'the -inf mask gives NaN on a fully masked row (https://...)'}, "
            "or a fact's name or key to a dict with its kind, e.g. {'float64_inside': {'kind': 'precision', "
            "'computed_in': 'float32', 'reason': 'why', 'tests': ['*/*/float64']}} (`attention-conformance docs "
            "divergences`), and a mode to such a map for that mode alone, e.g. {'compiled': {'sat': 'why'}}"
        )
    hook = getattr(module, "pin_numerics", None)
    if hook is not None and not (callable(hook) and not inspect.signature(hook).parameters):
        problems.append("pin_numerics must be a function of no arguments returning {switch: value}")
    excused = not_applicable if isinstance(not_applicable, dict) else {}  # a whole op declared needs no stub
    for fn_name, params in CONTRACT.items():
        fn = getattr(module, fn_name, None)
        if fn is None and (fn_name in OPTIONAL or (fn_name in OPS and fn_name in excused)):
            continue
        if not callable(fn):
            problems.append(f"missing function {fn_name}({', '.join(params)})")
            continue
        got = tuple(inspect.signature(fn).parameters)
        if got != params:
            problems.append(f"{fn_name}({', '.join(got)}) should be {fn_name}({', '.join(params)})")
    return problems


def _reasons(keys):
    return isinstance(keys, dict) and all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in keys.items()
    )


def _modes_problems(module):
    declared = getattr(module, "MODES", modes.DEFAULT)
    unknown = [k for k in declared if k not in modes.MODES] if isinstance(declared, dict) else []
    if unknown:
        return [f"MODES names {unknown[0]!r}, which is not a mode: the modes are {', '.join(modes.MODES)}"]
    if not (
        isinstance(declared, dict) and declared and all(isinstance(v, str) and v.strip() for v in declared.values())
    ):
        return [
            f"MODES must map each mode it runs, from {modes.MODES}, to what that mode runs, its first the default, "
            "e.g. {'eager': 'op by op', 'compiled': 'torch.compile (Inductor)'}"
        ]
    hook = getattr(module, "in_mode", None)
    if len(declared) > 1 and not (callable(hook) and len(inspect.signature(hook).parameters) == 2):
        return ["in_mode(mode, op) must return `op` as `mode` runs it, for an adapter with more than one mode"]
    return []


def not_applicable_key_problem(key):
    """What is wrong with a NOT_APPLICABLE key, or None. Keys: a dtype, an op or a case id;
    "op/output" or "case/output"; "op/dtype" or "case/dtype"; "param=value" for a word, switch or count a case
    passes."""
    match = ids.NOT_APPLICABLE_KEY.fullmatch(key)
    written = key.partition("=")
    if not match and written[1] and written[2] != written[2].lower():
        return f"write the value as the spec does, in lower case: {written[0]}={written[2].lower()}"
    if not match:
        return (
            "must be a dtype, an op or a case id, 'op/output' or 'case/output' (e.g. 'attention_module/weights'), "
            "'op/dtype' (e.g. 'fused_rotary/float64') or 'param=value' (e.g. 'layer=mha')"
        )
    name, output, param = match.group(1), match.group(3), match.group(4)
    if name in OPS and output is not None and output not in OPS[name][1] and output not in DTYPES:
        return f"{name}() has no output {output!r}: its outputs are {', '.join(OPS[name][1])}, or write a dtype"
    if name in DTYPES and output is not None:
        return "a dtype covers every output; write the dtype alone"
    if param is not None:
        if param not in PARAMETERS:
            return f"{param!r} is not a parameter of any op"
        value = match.group(5)
        if param in CHOICES and value not in CHOICES[param]:
            return f"{param} takes {', '.join(CHOICES[param])}, not {value!r}"
    return None


def import_hint(name, exc):
    """What to try when the adapter `name` did not import because no such module exists; else ""."""
    from pathlib import Path

    # A file name or path where a module name belongs: "./mine.py" fails as a relative import, not a missing module.
    if name.endswith(".py") or "/" in name or "\\" in name:
        return f" (give the module's name, {Path(name).stem!r}, from the directory that holds it)"
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == name):
        return ""
    import difflib

    beside = [path.stem for path in Path.cwd().glob("*.py")]  # the user's own adapter, misspelled
    near = difflib.get_close_matches(name, [*NAMES, *beside], n=1)
    return f" (did you mean {near[0]!r}?)" if near and near[0] != name else f" (built-in adapters: {', '.join(NAMES)})"


def load(name):
    """Import one adapter, check its contract and pin its framework's numeric switches (pin). `name` may name a
    column, "<adapter>-<mode>" (modes.py): the adapter as that mode runs it."""
    adapter, mode = modes.split(name)
    if mode is not None:  # so an adapter's own name never ends in "-eager" or "-compiled"
        return in_mode(_imported(adapter), adapter, mode)
    module = _imported(name)
    return in_mode(module, name, next(iter(modes.declared(module))))


_BROUGHT_IN = {}  # module path -> what its first import in this process brought in (brought_in)


def brought_in(name, at_most=8):
    """What the import of adapter or column `name` brought into this process, in a line: the distributions
    ("name version", by name), or that it cannot tell (imported before the suite looked, as in a nested session)."""
    found = _BROUGHT_IN.get(module_path(modes.split(name)[0]))
    if found is None:
        return "cannot tell (imported before this session)"
    more = f", and {len(found) - at_most} more" if len(found) > at_most else ""
    return (", ".join(found[:at_most]) or "nothing new") + more


def _distributions(modules):
    tops = {m.partition(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"attention_conformance"}
    found = importlib.metadata.packages_distributions()
    names = {d for top in tops if not top.startswith("_") for d in found.get(top, ())}
    return [f"{d} {importlib.metadata.version(d)}" for d in sorted(names, key=str.lower)]


def _imported(name):
    path = module_path(name)
    before = None if path in sys.modules else set(sys.modules)
    try:
        module = importlib.import_module(path)
    except Exception as exc:  # a requested framework that does not import is a failure, never a skip
        raise AdapterError(
            f"adapter {name!r} was requested but does not import: {type(exc).__name__}: {exc}{import_hint(name, exc)}"
        ) from exc
    declare_rest(module)
    problems = contract_problems(module)
    if problems:
        raise AdapterError(f"adapter {name!r} breaks the contract: " + "; ".join(problems))
    pin(module)
    if before is not None:
        _BROUGHT_IN[path] = _distributions(set(sys.modules) - before)
    return module


def in_mode(module, name, mode):
    """The adapter as one of its modes runs it: every op through its in_mode(mode, op), MODE set, and
    NOT_APPLICABLE with that mode's own keys beside the ones every mode shares. A copy: the module is untouched."""
    declared = modes.declared(module)
    if mode not in declared:
        raise AdapterError(
            f"adapter {name!r} does not run mode {mode!r}: "
            + (
                f"its MODES declares {', '.join(declared)}"
                if hasattr(module, "MODES")
                else "it declares no MODES, so it runs eager only"
            )
        )
    view = types.ModuleType(module.__name__, module.__doc__)
    view.__dict__.update(module.__dict__)
    view.MODE, view.ADAPTER = mode, name
    reasons = getattr(module, "NOT_APPLICABLE", {})
    view.NOT_APPLICABLE = {k: v for k, v in reasons.items() if k not in declared} | reasons.get(mode, {})
    if mode != next(iter(declared)):
        for op in CONTRACT:
            if callable(getattr(module, op, None)):
                setattr(view, op, module.in_mode(mode, getattr(module, op)))
    return view


def pin(module):
    """The adapter's numeric switches pinned by its own pin_numerics() (docs/contract.md), as now set:
    {switch: value}; {} for an adapter that pins none. Repeatable: a switch someone changed is set again."""
    hook = getattr(module, "pin_numerics", None)
    return dict(hook()) if callable(hook) else {}
