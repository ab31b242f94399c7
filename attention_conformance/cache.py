"""The suite's disk cache: files computed once and kept outside the repository, shared by every
environment, each under a key that hashes everything it depends on.

Where: $ATTENTION_CONFORMANCE_CACHE, else $XDG_CACHE_HOME/attention-conformance, else
~/.cache/attention-conformance; ATTENTION_CONFORMANCE_CACHE=off keeps nothing on disk.
Part of what an adapter may import (docs/contract.md): a built-in adapter keeps its build
artefacts here (ONNX Runtime's exported graphs, JAX's compiled programs).
"""

import os
import tempfile
from pathlib import Path


def directory():
    """The cache folder, or None when caching is off."""
    chosen = os.environ.get("ATTENTION_CONFORMANCE_CACHE")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-conformance"


def entry(kind, name):
    """The path of one cached file, `<cache>/<kind>/<name>`, or None when caching is off."""
    folder = directory()
    return None if folder is None else folder / kind / name


REFUSED = []  # the first write the disk refused this process, as one line for the run's end (the plugin prints it)


def write(path, save):
    """Write `path` whole or not at all: `save(file)` fills a temporary file beside it, renamed into
    place, so parallel environments never see half a file. A read-only or full disk costs the next
    run time, never a result: the OSError is kept in REFUSED, never raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    except OSError as exc:
        _refused(path, exc)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            save(f)
        os.replace(tmp, path)
    except OSError as exc:
        _refused(path, exc)
        Path(tmp).unlink(missing_ok=True)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _refused(path, exc):
    if not REFUSED:
        REFUSED.append(
            f"cache: {directory() or path.parent} cannot be written ({exc.strerror or exc}): each run computes the "
            "oracle's answers again; "
            "set ATTENTION_CONFORMANCE_CACHE to a writable folder (or off)"
        )
