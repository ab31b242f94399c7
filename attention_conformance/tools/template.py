"""`attention-conformance template [NAME]`: the adapter template, or a built-in adapter as one file to
start from. A built-in adapter that is a package (one module per family) is written out as a single
module: the face's docstring, every module's imports once, then the face and each family in turn,
without the imports between them. A name two modules define would collide there, so none may
(tests/tools/test_template.py)."""

import ast
import sys
import textwrap

from attention_conformance.contract import registry
from attention_conformance.contract.meanings import MEANINGS
from attention_conformance.contract.ops import OPTIONAL
from attention_conformance.paths import ADAPTERS_DIR, SPEC_DIR


def text(name=None):
    """The source to print: the template for no name, else the built-in adapter `name` as one module."""
    files = registry.sources(name) if name else [ADAPTERS_DIR / "_template.py"]
    if not name:
        return _described(files[0].read_text())
    if len(files) == 1:  # a one-file adapter: the banner after its docstring
        source = files[0].read_text()
        tree = ast.parse(source)
        end = tree.body[0].end_lineno if ast.get_docstring(tree) is not None else 0
        lines = source.splitlines(keepends=True)
        banner = _banner(name, package=False) if (SPEC_DIR / "divergences" / f"{name}.yaml").is_file() else ""
        return "".join(lines[:end]) + banner + "".join(lines[end:])
    imports, names_from, parts, docstring = [], {}, [], None
    for path in [files[0], *_dependencies_first(files[1:])]:
        source = path.read_text()
        lines = source.splitlines(keepends=True)
        tree = ast.parse(source, str(path))
        body = tree.body
        if ast.get_docstring(tree, clean=False) is not None:
            if docstring is None:
                docstring = "".join(lines[: body[0].end_lineno])
            body = body[1:]
        kept = []
        for node in body:
            segment = "".join(lines[_start(lines, node) : node.end_lineno])
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # the families' imports of each other: one module now
            if isinstance(node, ast.ImportFrom) and "#" not in segment:  # one line per module, its names merged
                names_from.setdefault(node.module, set()).update((a.name, a.asname) for a in node.names)
            elif isinstance(node, (ast.Import, ast.ImportFrom)) or _sets_environment(node):
                if segment not in imports:
                    imports.append(segment)
            else:
                kept.append(segment)
        title = f"{path.parent.name}/{path.name}"
        parts.append(f"# --- {title} " + "-" * max(3, 100 - len(title)) + "\n\n" + "\n\n".join(kept))
    for module, names in names_from.items():
        listed = ", ".join(
            n if a is None else f"{n} as {a}" for n, a in sorted(names, key=lambda na: (na[0], na[1] or ""))
        )
        imports.append(f"from {module} import {listed}\n")
    imports.sort(key=_import_group)
    grouped = "".join(
        ("\n" if i and _import_group(line)[0] != _import_group(imports[i - 1])[0] else "") + line
        for i, line in enumerate(imports)
    )
    return docstring + _banner(name, package=True) + "\n" + grouped + "\n\n" + "\n\n".join(parts)


def _described(source):
    """The template with each stub saying what it returns and what it stands for (contract/meanings.py, the words of
    docs/contract.md's table): a user who installed from pip has no docs/ to look in (issue 60, two outside trials)."""
    lines = source.splitlines(keepends=True)
    for node in sorted(ast.parse(source).body, key=lambda n: -n.lineno):  # from the bottom: line numbers stay put
        if isinstance(node, ast.FunctionDef) and node.name in MEANINGS and ast.get_docstring(node) is None:
            returns, stands_for = MEANINGS[node.name]
            said = ("Optional. " if node.name in OPTIONAL else "") + f"Returns {returns}."
            said += f" Stands for {stands_for}." if stands_for else ""
            wrapped = textwrap.wrap(said, 112, break_long_words=False, break_on_hyphens=False)
            lines.insert(node.body[0].lineno - 1, '    """' + "\n    ".join(wrapped) + '"""\n')
    return "".join(lines)


def _banner(name, package):
    """What a copy of a built-in adapter needs to know: where it came from, and that its known divergences stay
    with the suite's data."""
    lines = [f"adapters/{name}/ (one module per family) as one file" if package else f"adapters/{name}.py"]
    if (SPEC_DIR / "divergences" / f"{name}.yaml").is_file():
        lines += [
            f"Its known divergences stay in the suite (spec/divergences/{name}.yaml); a copy takes them over with",
            "    from attention_conformance import known_divergences",
            f"    KNOWN_DIVERGENCES = known_divergences({name!r})",
        ]
    lines[0] = f"`attention-conformance template {name}`: {lines[0]}."
    return "\n" + "".join(f"# {line}\n" for line in lines)


def _import_group(line):
    """The standard library first (os.environ set right after `import os`, before any framework's import), then
    third-party modules, then the suite; by module within each."""
    top = "os" if line.startswith("os.environ") else line.split()[1].split(".")[0]
    group = 2 if top == "attention_conformance" else 0 if top in sys.stdlib_module_names else 1
    return group, top, line


def _dependencies_first(paths):
    """The family modules ordered so that each comes after the modules it imports (shared.py first)."""
    needs = {
        path.stem: {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        }
        for path in paths
    }
    ordered = []
    while len(ordered) < len(paths):
        ready = [p for p in paths if p not in ordered and needs[p.stem] <= {o.stem for o in ordered}]
        if not ready:
            raise ValueError(f"the modules of {paths[0].parent} import each other in a circle")
        ordered.append(ready[0])
    return ordered


def _start(lines, node):
    """The statement's first line (0-based), its decorators and the comment lines directly above it included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return first


def _sets_environment(node):
    """os.environ[...] = ... among the imports: it must stay before the framework's import (Keras's backend)."""
    return isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).startswith("os.environ")
