import ast
import re

import pytest

from attention_conformance.contract import registry
from attention_conformance.contract.meanings import MEANINGS
from attention_conformance.contract.ops import CONTRACT, OPTIONAL
from attention_conformance.paths import ADAPTERS_DIR
from attention_conformance.tools import template

PACKAGES = [name for name in registry.NAMES if len(registry.sources(name)) > 1]


def _defined(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_a_file_adapter_and_the_template_are_printed_as_they_are():
    printed = template.text()
    assert re.sub(r'\n    """[^"]*(?:"(?!"")[^"]*)*"""', "", printed) == (ADAPTERS_DIR / "_template.py").read_text()
    banner = template._banner("tfjs", package=False)  # how a copy takes over tfjs's known divergences
    assert banner in template.text("tfjs")
    assert template.text("tfjs").replace(banner, "") == (ADAPTERS_DIR / "tfjs.py").read_text()


def test_the_built_in_packages_are_those_over_one_file():
    assert {"torch", "jax", "tensorflow"} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_is_one_module_defining_everything_its_modules_define(name):
    tree = ast.parse(template.text(name))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], "a relative import is left"
    every = set().union(*(_defined(ast.parse(path.read_text())) for path in registry.sources(name)))
    assert every <= _defined(tree)
    assert {op for op in CONTRACT if op not in OPTIONAL} <= _defined(tree)


@pytest.mark.parametrize("name", PACKAGES)
def test_the_face_imports_every_op_its_families_define(name):
    """The suite reads the ops off the package: one a family defines and the face leaves out is missing."""
    face, *families = registry.sources(name)
    by_module = {path.stem: _defined(ast.parse(path.read_text())) for path in families}
    imported = set()
    for node in ast.parse(face.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            star = [a for a in node.names if a.name == "*"]
            imported |= (
                {n for n in by_module[node.module] if not n.startswith("_")} if star else {a.name for a in node.names}
            )
    public = {n for names in by_module.values() for n in names if not n.startswith("_")}
    assert public - imported - _defined(ast.parse(face.read_text())) == set()


@pytest.mark.parametrize("name", PACKAGES)
def test_no_two_modules_of_a_package_define_one_name(name):
    """One file would keep only the last of two definitions: the other module's callers would change."""
    seen = {}
    for path in registry.sources(name):
        for defined in _defined(ast.parse(path.read_text())):
            assert defined not in seen, f"{defined} is defined in both {seen[defined]} and {path.name}"
            seen[defined] = path.name


@pytest.mark.parametrize("name", PACKAGES)
def test_each_name_is_defined_before_a_statement_at_module_level_uses_it(name):
    """Decorators and module-level statements run at import: the families come after what they import."""
    tree = ast.parse(template.text(name))
    defined = {
        alias.asname or alias.name.split(".")[0]
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for alias in n.names
    }
    every = _defined(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            run_now = [*node.decorator_list, *getattr(node, "bases", [])]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            run_now = []
        else:
            run_now = [node]
        used = {
            n.id for part in run_now for n in ast.walk(part) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        early = (used & every) - defined
        assert not early, f"line {node.lineno} uses {sorted(early)} before they are defined"
        defined |= _defined(ast.Module(body=[node], type_ignores=[]))


def test_the_template_has_every_op_of_the_contract_with_its_parameters_and_the_modes():
    """Required ops as stubs, optional ones as commented stubs: a newcomer copies signatures from one file."""
    import re

    from attention_conformance.contract.ops import CONTRACT, OPTIONAL, PARAMETERS

    text = template.text()
    for op in sorted(set(CONTRACT) | set(OPTIONAL)):
        params = CONTRACT[op] if op in CONTRACT else PARAMETERS[op]
        found = re.search(rf"def {op}\(\s*(?:#\s*)?([^)]*)\)", text)
        assert found, f"_template.py has no stub for {op}"
        assert [p.strip(" #\n") for p in found.group(1).split(",") if p.strip(" #\n")] == list(params), op
    assert "# MODES = {" in text and "# def in_mode(mode, op):" in text


def test_the_printed_template_says_what_each_function_returns():
    """A user who installed from pip has no docs/ folder: each stub carries its row of docs/contract.md (issue 60)."""
    tree = ast.parse(template.text())
    described = {node.name: ast.get_docstring(node) for node in tree.body if isinstance(node, ast.FunctionDef)}
    for op in CONTRACT:
        if op in described:
            returns = MEANINGS[op][0]
            assert described[op] and " ".join(returns.split()) in " ".join(described[op].split()), op
