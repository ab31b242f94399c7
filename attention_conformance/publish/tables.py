"""The tables the docs carry, generated from reports: `attention-conformance publish`.

    tox -m conformance -p auto && attention-conformance publish      # the summary table in docs/usage.md
    tox -e benchmark && attention-conformance publish                # and the benchmark's in docs/speed.md
    tox -e portability && attention-conformance publish              # and the portability table in docs/portability.md
    tox -p auto && tox -m full -p auto && attention-conformance publish   # and the family costs in docs/speed.md

Run in the checkout. What a table is made from is kept in docs/results/ (summary.json: the summary
table's rows, the spec's sha256 and the machine; benchmark.json and portability.json as those commands wrote
them), and each table is written between its markers. tests/publish/test_docs.py renders them again from
docs/results/ and fails when a committed table differs from its data, or its data was made from
another spec or another list of frameworks than the repository's.
"""

import hashlib
import inspect
import json
import re
from pathlib import Path

from attention_conformance import machine, modes, writing
from attention_conformance.cases import loader
from attention_conformance.contract import ops, registry
from attention_conformance.contract.meanings import MEANINGS
from attention_conformance.contract.outputs import CHOICE_WORDS, OUTPUTS
from attention_conformance.paths import SPEC_DIR
from attention_conformance.publish import costs, speed, summary
from attention_conformance.run import reports

RESULTS = Path("docs/results")
PUBLISHED = Path("spec/published")  # in the checkout; paths.PUBLISHED_DIR installed
# name -> (file the table is in, begin marker, end marker), relative to the checkout
BLOCKS = {
    "summary": (
        "docs/usage.md",
        "<!-- summary table: written by `attention-conformance publish`; do not edit by hand -->",
        "<!-- end of summary table -->",
    ),
    "portability": (
        "docs/portability.md",
        "<!-- portability table: written by `attention-conformance publish`; do not edit by hand -->",
        "<!-- end of portability table -->",
    ),
    "contract": (
        "docs/contract.md",
        "<!-- contract table: written by `attention-conformance publish` from contract/ops.py and meanings.py -->",
        "<!-- end of contract table -->",
    ),
    "conventions": (
        "docs/contract.md",
        "<!-- conventions: written by `attention-conformance publish` from spec/attention.yaml -->",
        "<!-- end of conventions -->",
    ),
    "outputs": (
        "docs/contract.md",
        "<!-- outputs: written by `attention-conformance publish` from contract/outputs.py -->",
        "<!-- end of outputs -->",
    ),
    "choices": (
        "docs/contract.md",
        "<!-- choices: written by `attention-conformance publish` from contract/ops.py and outputs.py -->",
        "<!-- end of choices -->",
    ),
    "helpers": (
        "docs/contract.md",
        "<!-- helpers: written by `attention-conformance publish` from the package's public functions -->",
        "<!-- end of helpers -->",
    ),
    "benchmark": (
        "docs/speed.md",
        "<!-- benchmark tables: written by `attention-conformance publish`; do not edit by hand -->",
        "<!-- end of benchmark tables -->",
    ),
    "costs": (
        "docs/speed.md",
        "<!-- family costs: written by `attention-conformance publish`; do not edit by hand -->",
        "<!-- end of family costs -->",
    ),
}
# What makes each run-made table's data, for the line that says a table was left as it is.
MADE_BY = {
    "summary": "`tox -m conformance -p auto`",
    "benchmark": "`tox -e benchmark`",
    "portability": "`tox -e portability`",
    "costs": "`tox -p auto` and `tox -m full -p auto`",
}


def spec_sha256():
    return hashlib.sha256((SPEC_DIR / "attention.yaml").read_bytes()).hexdigest()


def summary_data(directory):
    """summary.json's content from a reports folder holding a complete, conforming run of every built-in adapter."""
    try:
        found, unfinished = reports.merge([directory])
    except reports.ReportError as exc:
        raise SystemExit(f"error: {exc}") from None
    convention_cases = {
        case_id for r in found.values() for case_id, _, convention in r["outline"]["cases"] if convention
    }
    rows, problems = [], [f"{name}: unfinished ({why})" for name, why in unfinished]
    # Each built-in adapter, then its other modes' columns where the folder holds them (the full tier runs them).
    columns = [
        c
        for name in registry.NAMES
        for c in [name, *sorted(k for k in found if k != name and modes.split(k)[0] == name)]
    ]
    for name in columns:
        cells, problem = summary.row(name, found.get(name), convention_cases)
        rows.append(cells)
        problems += [f"{name}: {problem}"] * bool(problem)
    if problems:
        raise SystemExit(
            f"error: {directory} is not a complete, conforming run of every built-in adapter ({problems[0]}): "
            "run `tox -m conformance -p auto` first"
        )
    made_from = {r["spec_sha256"] for r in found.values()}
    if made_from != {spec_sha256()}:
        raise SystemExit(
            f"error: {directory} was made from another spec than {SPEC_DIR / 'attention.yaml'}: rerun the main job"
        )
    return {
        "spec_sha256": spec_sha256(),
        "adapters": columns,
        "rows": rows,
        "measured_on": sorted({machine.one_line(r["machine"]) for r in found.values()}),
        "finished": max(r["finished"] for r in found.values()),
    }


def summary_table(data):
    """The published run's table (docs/usage.md), from summary.json."""
    return "\n".join(
        summary._table(data["rows"])
        + [
            "",
            f"Measured on {'; '.join(data['measured_on'])}, {data['finished'][:10]}, spec {data['spec_sha256'][:12]}.",
        ]
    )


def benchmark_data(directory):
    """reports/benchmark.json's content, or None where the benchmark has not been run."""
    path = Path(directory) / "benchmark.json"
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and not doc.get("frameworks"):
            raise SystemExit(f"error: {path} measured no framework: rerun `tox -e benchmark` after the main job")
        speed.tables(doc)
        measured = sorted(r["adapter"] for r in doc["frameworks"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SystemExit(
            f"error: {path} is not a report of `tox -e benchmark` ({type(exc).__name__}: {exc}): rerun it"
        ) from None
    if measured != sorted(registry.NAMES):
        raise SystemExit(
            f"error: {path} measured {', '.join(measured)}, not every built-in adapter: rerun `tox -e benchmark`"
        )
    return doc


def portability_data(directory):
    """reports/portability.json's content (`tox -e portability`), or None where it has not been run."""
    path = Path(directory) / "portability.json"
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        results = {r["adapter"]: r for r in doc["results"]}
        bad = [name for name, r in results.items() if r["problems"] or r.get("changed")]
        bad += ["the oracle"] * bool(doc["oracle"]["differ"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SystemExit(
            f"error: {path} is not a report of `tox -e portability` ({type(exc).__name__}: {exc})"
        ) from None
    # Each framework's other mode reruns under the settings too, a row of its own (`torch-compiled`).
    if bad or sorted({modes.split(name)[0] for name in results}) != sorted(registry.NAMES):
        why = f"it failed for {', '.join(bad)}" if bad else "not every built-in adapter is in it"
        raise SystemExit(
            f"error: {path} is not a passing run of every built-in adapter ({why}): rerun `tox -e portability`"
        )
    return doc


def _seconds(taken):
    """A rerun's seconds, or what stands for them: as-is is the adapter's own run where newer (emulation.measure)."""
    return f"{taken:.0f}" if isinstance(taken, (int, float)) else str(taken)


def portability_table(doc):
    """docs/portability.md's table, from portability.json."""
    labels = [label for label in doc["settings"] if label != "as-is"]
    head = (
        f"| framework | tests | outcome changes | margins moved ({' / '.join(labels)}) "
        f"| seconds (as-is / {' / '.join(labels)}) | margins above {doc['watch_above']} |"
    )
    lines = [f"Measured on {machine.one_line(doc['machine'])}.", "", head, "|---|---|---|---|---|---|"]
    for r in doc["results"]:
        if "skipped" in r:
            lines.append(f"| {r['adapter']} | not rerun: {r['skipped']} | | | | |")
            continue
        above = ", ".join(
            f"`{test}` {max(m for m in margins.values() if m is not None):.2f}" for test, margins in r["watch"]
        )
        lines.append(
            f"| {r['adapter']} | {r['tests']} | {len(r['changed'])} | {' / '.join(str(r['moved'][s]) for s in labels)} "
            f"| {' / '.join(_seconds(t) for t in r['seconds'].values())} | {above or 'none'} |"
            + (f" problems: {'; '.join(r['problems'])}" if r["problems"] else "")
        )
    oracle = doc["oracle"]
    lines += [
        "",
        f"The oracle: {oracle['compared']} answers recomputed under {oracle['recomputed_under']}, "
        + (f"{len(oracle['differ'])} differ." if oracle["differ"] else "all byte-identical to the as-is ones."),
    ]
    return "\n".join(lines)


def contract_data():
    """[signature, returns, what it is] for each function of the contract, in the op table's order: made from the
    code (ops.CONTRACT, ops.OPTIONAL, meanings.MEANINGS), so it needs no run and keeps no data in docs/results/."""
    missing = sorted(set(ops.CONTRACT) ^ set(MEANINGS))
    if missing:
        raise SystemExit(f"error: contract/meanings.py and contract/ops.py disagree on {', '.join(missing)}")
    return [
        [
            f"{name}({', '.join(params)})",
            MEANINGS[name][0],
            ("**optional**: " if name in ops.OPTIONAL else "") + MEANINGS[name][1],
        ]
        for name, params in ops.CONTRACT.items()
    ]


def outputs_data():
    """[function, output, what it is] for each output of a function with more than one (meanings.OUTPUTS)."""
    several = {op: outs for op, (_, outs) in ops.OPS.items() if len(outs) > 1}
    missing = [f"{op}/{out}" for op, outs in several.items() for out in outs if out not in OUTPUTS.get(op, {})]
    if missing:
        raise SystemExit(f"error: contract/outputs.py's OUTPUTS says nothing of {', '.join(missing)}")
    return [[op, out, OUTPUTS[op][out]] for op, outs in several.items() for out in outs]


def choices_data():
    """[parameter, value, what it selects] for every value a choice parameter takes (ops.CHOICES)."""
    missing = [f"{p}={v}" for p, values in ops.CHOICES.items() for v in values if v not in CHOICE_WORDS.get(p, {})]
    if missing:
        raise SystemExit(f"error: contract/outputs.py's CHOICE_WORDS says nothing of {', '.join(missing)}")
    return [[param, value, CHOICE_WORDS[param][value]] for param, values in ops.CHOICES.items() for value in values]


def helpers_data():
    """[call, what it does] for the public helpers an adapter may import: known_divergences and ports' functions."""
    from attention_conformance import ports
    from attention_conformance.cases import divergences

    found = [("attention_conformance", divergences.known_divergences)] + [
        ("attention_conformance.ports", f)
        for name, f in vars(ports).items()
        if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == ports.__name__
    ]
    return [
        [f"{where}.{f.__name__}{inspect.signature(f)}", " ".join(inspect.getdoc(f).split("\n\n")[0].split())]
        for where, f in found
    ]


def outputs_table(rows):
    lines = ["| function | output | what it is |", "|---|---|---|"]
    return "\n".join(lines + [f"| `{op}` | `{out}` | {what} |" for op, out, what in rows])


def choices_table(rows):
    lines = ["| parameter | value | what it selects |", "|---|---|---|"]
    return "\n".join(lines + [f"| `{param}` | `{value!r}` | {what} |" for param, value, what in rows])


def helpers_table(rows):
    return "\n".join(f"- `{call}`: {what}" for call, what in rows)


def conventions_data():
    """{name: text} of the spec's conventions, the facts an adapter's author needs (RoPE's pairs, a window's count,
    the cap's order, a sink's part): made from the spec, so a case's `conventions.<name>` is on the page."""
    return loader.load().conventions


def conventions_table(conventions):
    return "\n\n".join(f"- **`conventions.{name}`**: {' '.join(text.split())}" for name, text in conventions.items())


def contract_table(rows):
    lines = ["| function | returns | mapping-table row / document line |", "|---|---|---|"]
    return "\n".join(lines + [f"| `{signature}` | {returns} | {what} |" for signature, returns, what in rows])


RENDER = {
    "summary": summary_table,
    "contract": contract_table,
    "conventions": conventions_table,
    "outputs": outputs_table,
    "choices": choices_table,
    "helpers": helpers_table,
    "benchmark": speed.tables,
    "portability": portability_table,
    "costs": costs.table,
}
DATA_IN_CODE = (
    "contract",
    "conventions",
    "outputs",
    "choices",
    "helpers",
)  # rendered from the package itself: no docs/results/<name>.json


def block(name, root="."):
    """The text now between a table's markers, or a SystemExit naming the file that lost them."""
    path, begin, end = BLOCKS[name]
    if not (Path(root) / path).is_file():
        raise SystemExit(f"error: no {Path(root) / path}: publish runs in the attention-conformance checkout")
    text = (Path(root) / path).read_text()
    found = re.search(re.escape(begin) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    if not found:
        raise SystemExit(f"error: {Path(root) / path} has no {name} markers ({begin!r} ... {end!r})")
    return found.group(1)


def put(name, text, root="."):
    """Replace what stands between a table's markers with `text`; nothing is written if they are missing."""
    path, begin, end = BLOCKS[name]
    block(name, root)
    file = Path(root) / path
    pattern = re.compile(re.escape(begin) + r"\n.*?\n" + re.escape(end), re.S)
    writing.whole(file, pattern.sub(lambda _: f"{begin}\n{text}\n{end}", file.read_text(), count=1).encode())


def main(directory=reports.DEFAULT_DIR, root="."):
    for name in BLOCKS:  # every file is checked for its markers before anything is read or written
        block(name, root)
    # The contract's table first: it is made from the package, so it needs no run (a contributor adding an op
    # writes it without every framework installed).
    put("contract", contract_table(contract_data()), root)
    put("conventions", conventions_table(conventions_data()), root)
    for name in ("outputs", "choices", "helpers"):
        put(name, RENDER[name](globals()[f"{name}_data"]()), root)
    print(f"contract: {BLOCKS['contract'][0]} from the package and the spec's conventions")
    made = {
        "summary": summary_data(directory),
        "benchmark": benchmark_data(directory),
        "portability": portability_data(directory),
        "costs": costs.data(directory),
    }
    lacking = made["summary"] and reports.unpublished(Path(root) / PUBLISHED, made["summary"]["adapters"])
    if lacking:
        raise SystemExit(
            f"error: {Path(directory)} has no {', '.join(lacking)} column, which {PUBLISHED} publishes: run the full "
            f"tier too (`tox -m full -p auto`), or delete {PUBLISHED}/<column>.json.gz to stop publishing one"
        )
    for name, data in made.items():
        if data is None:
            print(f"{name}: nothing for it in {Path(directory)}, table left as it is ({MADE_BY[name]} makes it)")
            continue
        writing.whole(Path(root) / RESULTS / f"{name}.json", (json.dumps(data, indent=1) + "\n").encode())
        put(name, RENDER[name](data), root)
        print(f"{name}: {BLOCKS[name][0]} from {Path(directory)}, data in {RESULTS / (name + '.json')}")
    reports.publish(directory, made["summary"]["adapters"], Path(root) / PUBLISHED)
    print(f"reports: {PUBLISHED}, each column's, for `summary --with-published`")
    return 0
