"""The engine's layers, read from its source: every `import`, wherever it stands (a function-local
import included), goes down the stages or within one, never up, and never round in a cycle; no module
passes 400 lines; an adapter imports only the public API (docs/contract.md, "What an adapter may import"), and
no module of a built-in adapter passes 450 lines (past that, a family gets a module of its own).

Stages, lowest first: the leaves (the package's top-level modules but its faces), contract/, cases/,
run/, publish/, tools/, and the faces (the package, __main__, cli, plugin, conformance) on top."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attention_conformance"
STAGES = ("contract", "cases", "run", "publish", "tools")
FACES = ("attention_conformance", "__main__", "cli", "plugin", "conformance")
MOST_LINES = 400
# What an adapter may import of the suite (docs/contract.md); the reference adapter is the oracle, so it
# computes with the suite's exact arithmetic and error bounds too.
PUBLIC = {"attention_conformance", "attention_conformance.ports", "attention_conformance.cache"}
ORACLE_ONLY = {
    "attention_conformance.deterministic",
    "attention_conformance.bounds",
    "attention_conformance.elementary",
    "attention_conformance.remembered",
    "attention_conformance.sides",
}
ADAPTER_MOST_LINES = 450


def _modules(root, package, paths=None):
    found = {}
    for path in sorted(root.rglob("*.py") if paths is None else paths):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


MODULES = _modules(PACKAGE, "attention_conformance")
# A built-in adapter is a file in adapters/ or a package there, one level deep (adapters/tfjs_node, the Node.js side
# of tfjs, is no package: its node_modules is not read).
ADAPTER_FILES = _modules(
    ROOT / "adapters",
    "attention_conformance.adapters",
    [
        *(ROOT / "adapters").glob("*.py"),
        *(p for init in (ROOT / "adapters").glob("*/__init__.py") for p in init.parent.glob("*.py")),
    ],
)
ADAPTER_MODULES = set(ADAPTER_FILES)


def _imports(name, path, known):
    """(imported module, line) for every import in the file, resolved to a module of `known` where it names
    one (`from attention_conformance.run import calls` imports run.calls, not run's __init__)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "attention_conformance":
                yield target, node.lineno


def rank(module):
    """The stage of a module of the package: 0 for a leaf, then the stages in order, the faces last."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FACES:
        return len(STAGES) + 1
    if parts[1] in STAGES:
        return STAGES.index(parts[1]) + 1
    return 0


def _edges():
    edges = {}
    for name, path in MODULES.items():
        for target, line in _imports(name, path, MODULES):
            if target.startswith("attention_conformance.adapters"):
                continue  # the oracle: checked by test_the_engine_imports_no_adapter_but_the_oracle
            if target not in MODULES:
                raise AssertionError(f"{path}:{line}: imports {target}, which is no module of the package")
            if target != name:
                edges.setdefault(name, {}).setdefault(target, line)
    return edges


def test_imports_go_down_the_stages():
    upward = [
        f"{MODULES[a].relative_to(ROOT)}:{line}: {a} imports {b}, a stage above it"
        for a, targets in _edges().items()
        for b, line in targets.items()
        if rank(b) > rank(a) or (rank(b) == rank(a) == len(STAGES) + 1 and b != "attention_conformance.cli")
    ]
    assert upward == []


def _cycle(edges):
    """One import cycle as a list of modules, or None (depth-first search, every import counted)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = _cycle(_edges())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_checks_catch_an_upward_import_and_a_cycle():
    """The two checks above can fail: an import from a leaf into run/, and two modules importing each other."""
    assert rank("attention_conformance.run.calls") > rank("attention_conformance.dtypes")
    assert rank("attention_conformance.cli") > rank("attention_conformance.tools.fuzz.command")
    assert _cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": 1}, "b": {}}) is None


def test_the_engine_imports_no_adapter_but_the_oracle():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {target}"
        for name, path in MODULES.items()
        for target, line in _imports(name, path, set(MODULES) | ADAPTER_MODULES)
        if target.startswith("attention_conformance.adapters") and target != "attention_conformance.adapters.reference"
    ]
    assert found == []


@pytest.mark.parametrize("name", sorted(MODULES), ids=lambda n: n.removeprefix("attention_conformance."))
def test_no_module_passes_400_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MOST_LINES, f"{MODULES[name].relative_to(ROOT)}: {lines} lines; split it by job"


def _adapter_of(name):
    """attention_conformance.adapters.torch for any module of the torch adapter's package."""
    return ".".join(name.split(".")[:3])


@pytest.mark.parametrize("name", sorted(ADAPTER_FILES), ids=lambda n: n.removeprefix("attention_conformance.adapters."))
def test_an_adapter_imports_only_the_public_api(name):
    path = ADAPTER_FILES[name]
    own = {n for n in ADAPTER_MODULES if _adapter_of(n) == _adapter_of(name)}  # its package's other modules
    allowed = PUBLIC | own | (ORACLE_ONLY if _adapter_of(name).endswith(".reference") else set())
    known = set(MODULES) | ADAPTER_MODULES
    wrong = [f"{target} (line {line})" for target, line in _imports(name, path, known) if target not in allowed]
    assert wrong == [], f"{path.relative_to(ROOT)} imports beyond the public API: {', '.join(wrong)}"


@pytest.mark.parametrize("name", sorted(ADAPTER_FILES), ids=lambda n: n.removeprefix("attention_conformance.adapters."))
def test_no_module_of_an_adapter_passes_450_lines(name):
    lines = len(ADAPTER_FILES[name].read_text().splitlines())
    assert lines <= ADAPTER_MOST_LINES, (
        f"{ADAPTER_FILES[name].relative_to(ROOT)}: {lines} lines; give a family a module of its own "
        "(adapters/torch/ is a package of one module per family)"
    )


# A module whose test file is not named after it: the file that exercises it directly.
TESTED_IN = {
    "attention_conformance": "tests/test_out_of_tree.py",  # known_divergences(), as an outside adapter calls it
    "attention_conformance.publish.page": "tests/publish/test_page_data.py",  # test_page.py: the same in chromium
    # tests/tools/fuzz/test_command.py has the name: two test files of one basename collide without __init__.py.
    "attention_conformance.tools.explain.command": "tests/tools/explain/test_explain.py",
}
NO_LOGIC = {"attention_conformance.__main__", "attention_conformance.paths", "attention_conformance.conformance"}


def _has_logic(path):
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in ast.parse(path.read_text()).body)


def _test_file(name):
    if name in TESTED_IN:
        return ROOT / TESTED_IN[name]
    parts = name.split(".")[1:]
    return ROOT / "tests" / Path(*parts[:-1], f"test_{parts[-1]}.py")


@pytest.mark.parametrize(
    "name",
    sorted(n for n, p in MODULES.items() if _has_logic(p) and n not in NO_LOGIC),
    ids=lambda n: n.removeprefix("attention_conformance."),
)
def test_every_module_with_logic_has_a_test_file_that_imports_it(name):
    path = _test_file(name)
    assert path.is_file(), (
        f"{MODULES[name].relative_to(ROOT)} has no test file of its own: write {path.relative_to(ROOT)}"
    )
    module, _, last = name.rpartition(".")
    text = path.read_text()
    assert name in text or f"from {module} import" in text and last in text, (
        f"{path.relative_to(ROOT)} does not import {name}"
    )


def test_every_sub_package_is_in_the_wheel():
    """pyproject.toml lists the packages the wheel carries: a stage folder left off is missing from every
    `pip install` (tox installs editable, so only an installed copy would show it)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {name for name, path in {**MODULES, **ADAPTER_FILES}.items() if path.name == "__init__.py"}
    assert folders - listed == set(), "add to pyproject.toml's [tool.setuptools] packages"
