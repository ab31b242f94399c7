"""Writing a finding: the case as spec YAML, and a reproducer that needs only the framework and NumPy
(the adapter's function inlined, the inputs and the float64 expectation embedded)."""

import ast
import base64
import builtins
import inspect
import io
import sys
import textwrap
from pathlib import Path

import numpy as np

from attention_conformance import modes, sides, writing
from attention_conformance.cases import generated
from attention_conformance.run import tolerance_model

# --- writing a finding ------------------------------------------------------------------------


def case_yaml(spec, finding, adapter_name):
    """The finding as a spec case (YAML text, indented to paste under `cases:`), and its id."""
    import yaml

    vocabulary = set(spec.vocabulary)
    op, inputs = finding.op, finding.inputs
    words = ["random"] + [w for w in op.split("_") if w in vocabulary and w != "random"]
    if inputs.get("causal") and "causal" not in words:
        words.append("causal")
    if "batched" not in words and len(generated.shape(inputs.get("x"))) == 3:
        words.append("batched")
    suffixes = (
        [[]]
        + [[a] for a in ("one", "two", "four", "x2", "x8", "1", "3")]
        + [[a, b] for a in ("one", "two", "four") for b in ("one", "two", "four", "x2", "x8", "1", "3")]
    )
    taken = set(spec.cases)
    case_id = next("_".join(words + s) for s in suffixes if "_".join(words + s) not in taken)
    twins = generated.twins(spec, op, inputs)
    family = next((c.family for c in twins), None) or next(c.family for c in spec.cases.values() if c.op == op)
    conventions = {c.convention for c in twins}
    raw = {"id": case_id, "family": family}
    if len(conventions) == 1 and None not in conventions:
        raw["convention"] = conventions.pop()
    note = f"Found by attention-conformance fuzz on {adapter_name} in {finding.dtype}: " + "; ".join(
        f"{o}: {m}" for o, m in sorted(finding.messages.items())
    )
    raw |= {"note": note[:600], "op": op, "inputs": inputs, "expect": {o: {"reference": True} for o in finding.failing}}
    text = yaml.safe_dump([raw], sort_keys=False, default_flow_style=None, width=120, allow_unicode=False)
    return case_id, textwrap.indent(text, "  ")


class CannotInline(Exception):
    pass


_INLINED_TOPS = {"attention_conformance", "tests"}


class _Inliner:
    """The source that defines a function standalone: its own source and, recursively, every suite
    function, class and constant it reaches; third-party modules are imported, as in the original."""

    def __init__(self, own_tops):
        self.tops = _INLINED_TOPS | set(own_tops)
        self.imports, self.blocks, self.prelude = [], [], []
        self.bound = {}  # emitted name -> the object it is
        self.parsed = {}  # file -> module AST
        self.namespaces = {}  # name -> (suite module, the attributes used of it)

    def _module_ast(self, g):
        file = g.get("__file__")
        if not file:
            raise CannotInline(f"module {g.get('__name__')} has no source file")
        if file not in self.parsed:
            source = Path(file).read_text()
            tree = ast.parse(source)
            self.parsed[file] = (tree, source)
            for node in tree.body:  # os.environ settings made before a framework's import
                if isinstance(node, ast.Assign) and "os.environ" in ast.unparse(node.targets[0]):
                    line = ast.unparse(node)
                    if line not in self.prelude:
                        self.prelude.append(line)
        return self.parsed[file]

    def _inlined(self, value):
        module = getattr(value, "__module__", None) or ""
        return module.split(".")[0] in self.tops

    def _bind(self, name, value):
        if name in self.bound:
            if self.bound[name] is not value:
                raise CannotInline(f"two different objects are both named {name!r}")
            return False
        self.bound[name] = value
        return True

    def _import(self, line):
        if line not in self.imports:
            self.imports.append(line)

    def need(self, name, g, attributes=None):
        if name not in g:
            return
        value = g[name]
        if name in vars(builtins) and value is vars(builtins)[name]:
            return
        if inspect.ismodule(value):
            if value.__name__.split(".")[0] in self.tops:  # a suite module used as a namespace: what is used of it
                members = self.namespaces.setdefault(name, (value, set()))
                if members[0] is not value:
                    raise CannotInline(f"two different modules are both named {name!r}")
                for attr in sorted(attributes or ()):
                    if attr not in members[1]:
                        members[1].add(attr)
                        self.need(attr, vars(value))
                return
            if self._bind(name, value):
                self._import(
                    f"import {value.__name__}" if name == value.__name__ else f"import {value.__name__} as {name}"
                )
            return
        if (inspect.isfunction(value) or inspect.isclass(value) or hasattr(value, "__wrapped__")) and self._inlined(
            value
        ):
            if "<locals>" in getattr(value, "__qualname__", ""):
                raise CannotInline(f"{name} is made at run time ({value.__qualname__})")
            if not self._bind(name, value):
                return
            source = textwrap.dedent(inspect.getsource(value))
            inner = inspect.unwrap(value)
            globals_ = inner.__globals__ if inspect.isfunction(inner) else vars(sys.modules[value.__module__])
            self._module_ast(globals_)
            self.walk(ast.parse(source), globals_)
            self.blocks.append(source + (f"\n{name} = {value.__name__}\n" if value.__name__ != name else ""))
            return
        if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value) or callable(value):
            module = getattr(value, "__module__", None)
            home = sys.modules.get(module) if module else None
            if not hasattr(value, "__name__"):  # a callable object (transformers' hub-kernel functions): its class's
                # module is not where it is bound, and nothing names it for an import
                raise CannotInline(f"{name} is a {type(value).__name__} object, not a function an import can name")
            if inspect.isfunction(value) and getattr(home, value.__name__, None) is not value:
                # made by a factory (a closure) or renamed: `from module import name` would not find it
                raise CannotInline(f"{name} is made at run time ({module}.{value.__qualname__})")
            if module and self._bind(name, value):
                self._import(
                    f"from {module} import {value.__name__}" + (f" as {name}" if name != value.__name__ else "")
                )
            return
        # A constant: the statement that defines it at the top of its module, or its literal value.
        tree, source = self._module_ast(g)
        for node in tree.body:
            targets = [
                t
                for n in ([node] if isinstance(node, (ast.Assign, ast.AnnAssign)) else [])
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            ]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if self._bind(name, value):
                    self.walk(node.value, g)
                    self.blocks.append(ast.get_source_segment(source, node) + "\n")
                return
        try:
            text = repr(value)
            if ast.literal_eval(text) != value:
                raise ValueError
        except Exception:  # noqa: BLE001 - anything without a literal form
            raise CannotInline(f"{name} ({type(value).__name__}) has no source and no literal form") from None
        if self._bind(name, value):
            self.blocks.append(f"{name} = {text}\n")

    def walk(self, tree, g):
        names, attributes = [], {}
        # A name the function binds (an argument, an assignment) is its own, whatever the module calls so: a local
        # `heads` beside the star-imported module `heads` made a reproducer read heads.transpose from the module.
        local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        local |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in names and node.id not in local:
                names.append(node.id)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attributes.setdefault(node.value.id, set()).add(node.attr)
        for name in names:
            self.need(name, g, attributes.get(name))

    def namespace_blocks(self):
        return [
            f"{name} = types.SimpleNamespace({', '.join(f'{a}={a}' for a in sorted(attrs))})\n"
            for name, (_, attrs) in self.namespaces.items()
        ]


def _repro_data(fuzzer, finding):
    """The arrays the adapter received and the failing outputs' expectation and allowed error, as npz bytes."""
    kwargs = fuzzer.arrays(finding.inputs)
    exact, plain, derived = fuzzer.expected(finding.op, kwargs, finding.side)
    k = fuzzer.model[finding.dtype]
    arrays, scalars = {}, {}
    for name, value in kwargs.items():
        if isinstance(value, np.ndarray):
            arrays[f"in_{name}"] = value.astype(np.float32) if value.dtype.name == "bfloat16" else value
        else:
            scalars[name] = value
    for output in finding.failing:
        want = np.asarray(exact[output], dtype=np.float64)
        arrays[f"exact_{output}"] = want
        if want.dtype.kind == "f":
            with np.errstate(all="ignore"):
                arrays[f"allowed_{output}"] = np.broadcast_to(
                    tolerance_model.allowed(
                        finding.dtype, want, np.asarray(plain[output], dtype=np.float64), derived[output], k
                    ),
                    want.shape,
                )
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue(), scalars


# A backslash at a line's end continues the line: the reproducer's lines stay as they are, this file's within 120.
_REPRO_MAIN = """
# --- the case: inputs exactly as the adapter received them, and the float64 expectation ---------------
DTYPE = {dtype!r}
OP = {op!r}
RAISED = {raised!r}  # the exception the finding was, or None for numbers beyond the allowance
FAILING = {failing!r}
SCALARS = {scalars!r}
DATA = np.load(io.BytesIO(base64.b64decode(
{blob})))


def main():
    dtype = np.dtype(DTYPE) if DTYPE != "bfloat16" else np.dtype(__import__("ml_dtypes").bfloat16)
    inputs = {{name[3:]: DATA[name].astype(dtype) if DATA[name].dtype.kind == "f" else DATA[name]
              for name in DATA.files if name.startswith("in_")}}
    try:
        result = {call}(**inputs, **SCALARS)
    except Exception as exc:  # the finding may be that it raises on valid inputs
        if RAISED and type(exc).__name__ == RAISED:
            print(f"REPRODUCED: {{OP}}() in {{DTYPE}} raised {{type(exc).__name__}}: {{exc}}")
            return 1
        print(f"not reproduced: {{OP}}() in {{DTYPE}} raised {{type(exc).__name__}}: {{exc}}, where the finding was "
              f"{{'a ' + RAISED if RAISED else 'numbers beyond the allowance'}}: this script may lack something "
              "your module sets up beyond the functions it copied (registrations, globals)")
        return 2
    outputs = result if isinstance(result, dict) else {{FAILING[0]: result}}
    worst = 0.0
    for name in FAILING:
        expected = DATA["exact_" + name]
        got = np.asarray(outputs[name], dtype=np.float64)
        if got.shape != expected.shape:
            print(f"{{OP}} {{name}}: shape {{list(got.shape)}}, expected {{list(expected.shape)}}")
            worst = float("inf")
            continue
        allowed = DATA["allowed_" + name]
        both_nan = np.isnan(got) & np.isnan(expected)  # a fully masked row's NaN, where its side says NaN
        with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0 where an exact zero is allowed nothing: not shown
            error = np.abs(got - expected)
            ratio = np.where(error == 0, 0.0, error / allowed)
            ratio = np.where(both_nan, 0.0, np.where(np.isnan(error), np.inf, ratio))
        i = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.ndim else ()
        print(f"{{OP}} {{name}} in {{DTYPE}}: worst element {{[int(n) for n in i]}}: got {{float(got[i])!r}}, \
float64 expects "
              f"{{float(expected[i])!r}}, |error| {{error[i]:.3g}}, allowed {{allowed[i]:.3g}} \
({{ratio[i]:.3g}}x the allowance)")
        worst = max(worst, float(ratio[i]))
    print("REPRODUCED: beyond the allowed error" if worst > 1 else "not reproduced: within the allowed error")
    return 1 if worst > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
"""


def _beside(adapter):
    """The modules a user's adapter imports from its own folder (flash-attention's reference copied beside it, in an
    outside trial): inlined as the adapter is, where an import would need that folder on the path."""
    folder = Path(getattr(adapter, "__file__", None) or ".").resolve().parent
    found = set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if "." not in name and file and "site-packages" not in file:
            path = Path(file).resolve()
            if path.parent == folder or path.parent.parent == folder and path.name == "__init__.py":
                found.add(name)
    return found


def reproducer(fuzzer, finding, module_name):
    """A script needing only the framework and NumPy that calls the adapter's function on the case."""
    fn = getattr(fuzzer.adapter, finding.op)
    own = {getattr(fuzzer.adapter, "__name__", module_name).split(".")[0]} | _beside(fuzzer.adapter)
    blob, scalars = _repro_data(fuzzer, finding)
    encoded = base64.b64encode(blob).decode()
    blob_text = "\n".join(f'    "{encoded[i : i + 100]}"' for i in range(0, len(encoded), 100))
    header = (
        f'"""Reproducer: {module_name}\'s {finding.op}() in {finding.dtype} against float64 attention'
        + (f" on the side its declared convention takes ({sides.label(finding.side)})" if finding.side else "")
        + ".\n\n"
        "Written by `attention-conformance fuzz`; it needs only the framework and NumPy.\n"
        + "".join(f"  {o}: {textwrap.shorten(m, 400)}\n" for o, m in sorted(finding.messages.items()))
        + 'Exit 1 when the error is beyond the allowance (the tolerance model of attention-conformance).\n"""\n\n'
    )
    mode = getattr(fuzzer.adapter, "MODE", None)
    other_mode = mode is not None and mode != next(iter(modes.declared(fuzzer.adapter)))
    try:
        if other_mode:  # the op as that mode runs it exists only once in_mode has made it
            raise CannotInline(f"the {mode} mode's {finding.op}() is made at run time, by the adapter's in_mode")
        inliner = _Inliner(own)
        inliner.need(finding.op, {finding.op: fn})
        pin = getattr(fuzzer.adapter, "pin_numerics", None)
        if pin is not None:  # the framework's numeric switches, as the suite pins them
            inliner.need("pin_numerics", {"pin_numerics": pin})
        body = (
            "import base64\nimport io\nimport sys\nimport types\n\n"
            + ("import os\n" + "\n".join(inliner.prelude) + "\n\n" if inliner.prelude else "")
            + "\n".join(inliner.imports + ["import numpy as np"] * ("import numpy as np" not in inliner.imports))
            + "\n\n\n"
            + "\n\n".join(inliner.blocks + inliner.namespace_blocks())
            + ("\n\npin_numerics()\n" if pin is not None else "")
        )
        call = finding.op
    except (CannotInline, OSError, TypeError) as exc:  # the function cannot be lifted out: import the adapter instead
        body = (
            f"# NOT STANDALONE: {exc}; so this imports {finding.op} from the adapter module "
            f"{getattr(fuzzer.adapter, '__name__', module_name)!r}: it needs that module importable (run it where "
            "`attention-conformance fuzz` ran) and whatever the module imports.\n"
            f"import base64\nimport io\nimport importlib\nimport os\nimport sys\n\nimport numpy as np\n\n"
            "sys.path.insert(0, os.getcwd())  # as `attention-conformance fuzz` finds a module beside you\n"
            f"_adapter = importlib.import_module({getattr(fuzzer.adapter, '__name__', module_name)!r})\n"
            "getattr(_adapter, 'pin_numerics', lambda: None)()  # its numeric switches, as the suite pins them\n"
        )
        call = f"_adapter.in_mode({mode!r}, _adapter.{finding.op})" if other_mode else f"_adapter.{finding.op}"
    return (
        header
        + body
        + _REPRO_MAIN.format(
            dtype=finding.dtype,
            op=finding.op,
            raised=finding.raised.split(":")[0] if finding.raised else None,
            failing=tuple(finding.failing),
            scalars=scalars,
            blob=blob_text,
            call=call,
        )
    )


def write(fuzzer, finding, out, module_name, seed):
    out = Path(out)
    stem = f"{fuzzer.report_name.replace('.', '_')}-{finding.op}-{finding.dtype}"
    case_id, text = case_yaml(fuzzer.spec, finding, module_name)
    yaml_path, script_path = out / f"{stem}.yaml", out / f"{stem}.py"
    header = (
        f"# attention-conformance fuzz --adapter {module_name} --seed {seed} --dtype {finding.dtype}: "
        "paste under `cases:` in spec/attention.yaml\n"
    )
    writing.whole(yaml_path, (header + text).encode(), option="--out")
    writing.whole(script_path, reproducer(fuzzer, finding, module_name).encode(), option="--out")
    return case_id, yaml_path, script_path


def imports_adapter(script_path):
    """Whether a written reproducer imports the adapter (NOT STANDALONE), so it runs only where fuzz ran."""
    return "# NOT STANDALONE" in Path(script_path).read_text()
