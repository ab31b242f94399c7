"""What the portability run (tools/emulation.py) need not run again, and why: the adapter's own whole run on this
machine stands for its as-is run, and a setting this CPU already is needs no run of its own. Each is said in the
run's output; anything this cannot vouch for is rerun."""

import datetime
import hashlib
import subprocess
import sys
from pathlib import Path

from attention_conformance import machine
from attention_conformance.paths import ADAPTERS_DIR, SPEC_DIR
from attention_conformance.run import reports

# A setting this CPU already is, by the instruction set machine.describe() names: its as-is run is that run. On an
# AVX2 CPU each AVX2 cap is its own widest path, unless oneDNN has AVX-VNNI kernels above the cap there (Alder Lake's
# avx2_vnni, for bfloat16 too) or the column takes a stand-in for one of the setting's switches (TensorFlow: oneDNN
# off, which is not this CPU as it is). OPENBLAS_CORETYPE reaches NumPy's BLAS, which no framework here computes with.
NATIVE = {"AVX2": "AVX2"}
_ABOVE_AVX2 = ("avx_vnni", "avx_vnni_int8", "avx_ne_convert")


def native_reason(label, setting, stand_ins):
    """Why setting `label` ({switch: value}) need not be rerun on this CPU for a column that takes `stand_ins`
    (emulation.substitutes), or None: it must be."""
    isa = machine.describe()["isa"]
    if NATIVE.get(label) != isa or machine.cpu_flags() & set(_ABOVE_AVX2):
        return None
    if any(key.partition("=")[0] in setting for key in stand_ins):
        return None
    return f"this CPU is {isa}: its as-is run is that run"


def as_is_report(name, directory=None, python=sys.executable):
    """The adapter's own last run in `directory` (default ./reports), where it stands for the as-is run: complete
    and whole (no narrowed rerun on top), of the installed spec, on this machine with no switch set and no GPU,
    finished after the suite's, the adapters' and the spec's files last changed, by the framework version installed
    in `python`'s environment. `tox -e portability` runs after every framework's environment has run the spec here:
    rerunning it would repeat it."""
    try:
        report = reports.runs(directory or reports.DEFAULT_DIR).get(name)
    except reports.ReportError:
        return None
    here = machine.describe()
    if (
        report is None
        or not report.get("complete")
        or report.get("reruns")
        or report.get("published")
        or report.get("spec_sha256") != hashlib.sha256((SPEC_DIR / "attention.yaml").read_bytes()).hexdigest()
        or report.get("machine") != here | {"switches": {}}
        or here["switches"]
        or report.get("devices", {}).get("gpu") == "ran"
        or _finished(report) < _last_change()
    ):
        return None
    return report if report.get("version") == _version(name, python) else None


def _finished(report):
    try:
        return datetime.datetime.fromisoformat(report["finished"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return 0.0


def _last_change():
    """When the newest file of the suite, the built-in adapters or the spec was last written."""
    package = Path(machine.__file__).parent
    files = [p for root in (package, ADAPTERS_DIR, SPEC_DIR) for p in root.rglob("*") if p.suffix in (".py", ".yaml")]
    return max((p.stat().st_mtime for p in files), default=float("inf"))


def _version(name, python):
    """The adapter's version() as its environment reports it now: one import of the framework."""
    code = f"from attention_conformance.contract import registry; print(registry.load({name!r}).version())"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None
