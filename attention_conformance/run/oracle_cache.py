"""The oracle cache: the oracle's outputs, computed once per inputs and kept on disk outside the repository.

Every framework environment is compared with the same answers: adapters/reference/ on the
inputs as that framework received them, and in half precision the plain rounded-at-every-step
baseline. Recomputing them was most of each environment's run (the GPT-2-sized cases in four
dtypes), so each is stored under a key hashing everything it depends on: the op, the inputs'
dtypes, shapes and bytes, the rounding, the source of adapters/reference/ (and of the modules it
computes with) and NumPy's version.
A damaged file is recomputed, never trusted: an entry is a JSON header (each array's dtype, shape and place), the
arrays' bytes, and the CRC-32 of both, so a truncated or bit-flipped entry fails to load. (Until
issue 43 an entry was an .npz with a sha256 of its arrays inside, checked on every read: 2.2 ms a read against 0.3,
measured, at a thousand reads a run; the CRC covers what that digest did, short of a deliberate rewrite.)
writes go to a temporary file renamed into place, so parallel environments never see half a file.

Where: the suite's cache (cache.py), in its oracle/ folder; ATTENTION_CONFORMANCE_CACHE=off keeps nothing.
Only the oracle's answers are cached: the output under test is always computed by the adapter.
"""

import contextlib
import functools
import hashlib
import json
import math
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np

from attention_conformance import cache, deterministic, ports

try:
    import fcntl
except ImportError:  # no advisory locks (Windows): each environment computes its own answers, as before issue 73
    fcntl = None

FORMAT = "5"  # 4: a header, raw bytes and their CRC; inputs keyed by each array's own digest; 5: None outputs kept
SUFFIX = ".arrays"


def array_digest(value):
    """sha256 of an array's dtype, shape and bytes: an input's part of a key, computed once per resolved input
    (calls.py) however many oracles key on it."""
    a = np.ascontiguousarray(value)
    h = hashlib.sha256(f"{a.dtype.name}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.digest()


def sources(oracle):
    """The files an oracle module computes with: its file, every module of a package (the reference), or the tuple
    a bound's oracle names (tolerance_model.Derived)."""
    if getattr(oracle, "__path__", None):
        return _package_files(tuple(oracle.__path__))
    return oracle.__file__


@functools.lru_cache(maxsize=8)
def _package_files(folders):
    # Listed once a process: every lookup asks (0.75 s of a run globbing, measured under cProfile, issue 43).
    return tuple(sorted(p for folder in folders for p in Path(folder).glob("*.py")))


def _computing_files(oracle_file):
    """The oracle's source files (a bound's: its modules too), deterministic.py's arithmetic and ports.py's layouts."""
    files = (oracle_file,) if isinstance(oracle_file, (str, Path)) else oracle_file
    return (*map(str, files), deterministic.__file__, ports.__file__)


def _files_digest(files):
    h = hashlib.sha256()
    for source in files:
        data = Path(source).read_bytes()
        h.update(f"{len(data)}|".encode() + data)  # each file's length first: no text moved between files collides
    return h.digest()


# Read once a process, at its first lookup: a run's oracle is the code it imported, and hashing its ten files at each
# of a run's thousand lookups was a tenth of a run (measured, torch: 1.3 s).
fingerprint = functools.lru_cache(maxsize=8)(_files_digest)


def key(op, kwargs, rounding, oracle_file, keep=None, computing=None, digests=None):
    """Hex key of one oracle call: the op, its inputs, the outputs kept and everything that computes
    the answer (the oracle's source, deterministic.py's, its arithmetic, and ports.py's, for round_trip): read now,
    or given as `computing`, their fingerprint. `digests` maps an input's name to (that array, its array_digest):
    used only for that very array object."""
    h = hashlib.sha256(f"{FORMAT}|{op}|{rounding}|numpy {np.__version__}|{keep}|".encode())
    h.update(computing or _files_digest(_computing_files(oracle_file)))
    for name in sorted(kwargs):
        value = kwargs[name]
        if isinstance(value, np.ndarray):
            known = (digests or {}).get(name)
            digest = known[1] if known is not None and known[0] is value else array_digest(value)
            h.update(f"{name}|".encode() + digest)
        else:
            h.update(f"{name}|{type(value).__name__}|{value!r}|".encode())
    return h.hexdigest()


def read(path):
    """The arrays of an entry (read-only), or None where it is absent or damaged."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        whole, crc = memoryview(data)[:-4], int.from_bytes(data[-4:], "little")
        if len(data) < 8 or zlib.crc32(whole) != crc:  # the header's names, shapes and places too, not the values alone
            return None
        size = int.from_bytes(data[:4], "little")
        header = json.loads(bytes(whole[4 : 4 + size]))
        body, arrays, start = whole[4 + size :], {}, 0
        for name, (dtype, shape, at, length) in header["arrays"].items():
            dtype = _dtype(dtype)
            if at != start or length != math.prod(shape) * dtype.itemsize:  # the arrays tile the body, in order
                return None
            arrays[name] = np.frombuffer(body[at : at + length], dtype=dtype).reshape(shape)
            start += length
        return arrays | dict.fromkeys(header.get("none", ())) if start == len(body) else None
    except (OSError, ValueError, KeyError, TypeError):  # absent, truncated, not an entry: recompute
        return None


def _dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _write(path, arrays, none=()):
    """The entry written whole or not at all (cache.write); a read-only or full disk costs time, never a result.
    `none`: the outputs the oracle has no answer for (a bound of a step with no rule: gradients', dropout's)."""
    places, chunks, start = {}, [], 0
    for name, value in arrays.items():
        value = np.asarray(value)
        value = value.astype(value.dtype.newbyteorder("="), copy=False)  # the header names no byte order
        data = value.tobytes()  # in C order, whatever the array's layout
        places[name] = [value.dtype.name, list(value.shape), start, len(data)]
        chunks.append(data)
        start += len(data)
    header = json.dumps({"arrays": places, "none": list(none)}).encode()
    whole = len(header).to_bytes(4, "little") + header + b"".join(chunks)
    cache.write(path, lambda f: _save(f, whole, zlib.crc32(whole).to_bytes(4, "little")))


def _save(f, whole, crc):
    f.write(whole)
    f.write(crc)


def cached(op, kwargs, rounding, oracle_file, compute, keep=None, digests=None):
    """compute()'s dict of outputs as arrays, from the cache when an intact entry exists. `keep`
    names the outputs the case has expectations for: only those are stored and returned (a GPT-2-shaped layer's
    unchecked attention weights are 96 MiB in float64). `digests`: the inputs' own, as key() takes them."""

    def computed():
        result = compute()
        return result if keep is None else {name: result[name] for name in keep}

    computing = fingerprint(_computing_files(oracle_file))
    path = cache.entry("oracle", f"{key(op, kwargs, rounding, oracle_file, keep, computing, digests)}{SUFFIX}")
    if path is None:
        return computed()
    found = read(path)
    if found is not None:
        return found
    with _computing(path):
        found = read(path)  # computed by another environment while this one waited
        return found if found is not None else _kept(path, computed())


@contextlib.contextmanager
def _computing(path):
    """Hold `path`'s lock while its answer is computed: environments running side by side compute each answer once, the
    others wait and read it (issue 73: a first main job paid the float64 oracle once per framework). The lock file
    goes once the answer is written; a waiter holding the unlinked one reads the answer all the same. Where no lock can
    be had (no fcntl, a read-only cache), each computes its own, as before."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "ab") if fcntl is not None else None
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _kept(path, result):
    # An answer of None is kept as such: left uncached, it was computed again at every run (an outside trial saw a warm
    # run say "computing the oracle's answers" for its gradients, whose bound is None).
    none = [name for name, value in result.items() if value is None]
    arrays = {name: np.asarray(value) for name, value in result.items() if value is not None}
    if not all(a.dtype.kind in "biuf" or a.dtype.name == "bfloat16" for a in arrays.values()):
        return result
    _write(path, arrays, none)
    for value in arrays.values():
        value.flags.writeable = False
    return arrays | dict.fromkeys(none)  # the same types, read-only, whether it came from disk or not
