"""Golden tensors: a diff-readable JSON text format, a sha256 manifest, and strict loading.

A golden file holds named tensors: {"description": str, "tensors": {name: {"dtype", "shape",
"data"}}}. Each innermost row is one line, numbers are the shortest text that round-trips the
stored dtype exactly. MANIFEST.json records every file's sha256: a file edited by hand or
damaged on disk is refused before any of its numbers is used.
"""

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from attention_conformance import safe_io
from attention_conformance.paths import GOLDEN_DIR

MANIFEST = "MANIFEST.json"
DTYPES = ("float32", "float64")
MAX_FILE_BYTES = 4_000_000  # the largest golden file is ~16 kB; the text format spends ~20 bytes a number
MAX_ELEMENTS = 1_000_000
_FILE_NAME = re.compile(r"^[a-z0-9_]+\.json$")


class GoldenError(ValueError):
    def __init__(self, message):
        super().__init__(safe_io.one_line(message))


# --- writing ---------------------------------------------------------------


def _number(value, dtype):
    # numpy's str() of a float32 is its shortest round-trip text; repr() does that for float64.
    text = str(np.float32(value)) if dtype == "float32" else repr(float(value))
    return text.replace("inf", "Infinity").replace("nan", "NaN")  # rejected again by parse()


def _rows(array, dtype, indent):
    if array.ndim == 0:
        return _number(array, dtype)
    if array.ndim == 1:
        return "[" + ", ".join(_number(v, dtype) for v in array) + "]"
    inner = ",\n".join(" " * (indent + 2) + _rows(sub, dtype, indent + 2) for sub in array)
    return "[\n" + inner + "\n" + " " * indent + "]"


def render(description, tensors):
    """The file text for {name: ndarray}; byte-identical for identical input."""
    parts = []
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        dtype = str(array.dtype)
        if dtype not in DTYPES:
            raise GoldenError(f"tensor {name!r}: dtype {dtype} is not one of {DTYPES}")
        head = f'    {json.dumps(name)}: {{"dtype": "{dtype}", "shape": {json.dumps(list(array.shape))}, "data": '
        parts.append(head + _rows(array, dtype, 4) + "}")
    text = (
        "{\n" + f'  "description": {json.dumps(description)},\n' + '  "tensors": {\n' + ",\n".join(parts) + "\n  }\n}\n"
    )
    back = parse(text, "<render>")
    for name, array in tensors.items():  # never write a number that would not read back bit for bit
        if not np.array_equal(back[name], array) or back[name].dtype != np.asarray(array).dtype:
            raise GoldenError(f"tensor {name!r} does not round-trip through the text format")
    return text


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# --- reading ---------------------------------------------------------------


def _no_duplicates(where):
    def hook(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise GoldenError(f"{where}: duplicate key {key!r}")
            seen[key] = value
        return seen

    return hook


def _reject_constant(where):
    def hook(name):
        raise GoldenError(f"{where}: {name} is not allowed in golden data")

    return hook


def parse(text, where):
    """{name: ndarray} from a golden file's text; every defect is a GoldenError naming it."""
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates(where), parse_constant=_reject_constant(where))
    except GoldenError:
        raise
    except ValueError as exc:  # JSONDecodeError, and integers longer than Python converts (4,300 digits)
        raise GoldenError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise GoldenError(f"{where}: nested too deeply") from None
    if not isinstance(doc, dict) or set(doc) != {"description", "tensors"} or not isinstance(doc["tensors"], dict):
        raise GoldenError(f"{where}: top level must be exactly {{'description', 'tensors'}}")
    tensors = {}
    for name, entry in doc["tensors"].items():
        at = f"{where}: tensor {name!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data"}:
            raise GoldenError(f"{at}: fields must be exactly dtype, shape, data")
        if entry["dtype"] not in DTYPES:
            raise GoldenError(f"{at}: field 'dtype': {entry['dtype']!r} is not one of {DTYPES}")
        shape = entry["shape"]
        if not (
            isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        ):
            raise GoldenError(f"{at}: field 'shape': must be a list of non-negative integers")
        try:
            cells = np.array(entry["data"], dtype=object)
        except ValueError:
            raise GoldenError(f"{at}: field 'data': ragged rows, not a regular array") from None
        if not all(type(v) in (int, float) for v in cells.flat):  # numpy would turn "2" into 2.0
            raise GoldenError(f"{at}: field 'data': every element must be a number")
        if cells.size > MAX_ELEMENTS:
            raise GoldenError(f"{at}: field 'data': {cells.size} elements is over the limit of {MAX_ELEMENTS}")
        limit = float(np.finfo(entry["dtype"]).max)
        try:
            array = cells.astype(np.float64)
        except OverflowError:  # an integer past float64: marked inf, so the check below names it
            array = np.array([float(v) if abs(v) <= limit else np.inf for v in cells.flat]).reshape(cells.shape)
        bad = np.argwhere(~(np.abs(array) <= limit))  # inf (JSON's 1e400), and numbers too big for the dtype
        if bad.size:
            index = tuple(int(i) for i in bad[0])
            value = repr(cells[index])
            shown = value if len(value) < 30 else f"{value[:12]}... ({len(value)} digits)"
            raise GoldenError(f"{at}: field 'data': element {list(index)} = {shown} is not a finite {entry['dtype']}")
        if list(array.shape) != shape:
            raise GoldenError(f"{at}: field 'data': shape {list(array.shape)} but 'shape' says {shape}")
        # float64 holds every float32 exactly, and the shortest float32 text parses back to it.
        tensors[name] = array.astype(entry["dtype"])
    return tensors


def _read(path):
    try:
        return safe_io.read_bounded(path, MAX_FILE_BYTES, "a golden file")
    except safe_io.UnsafeInput as exc:
        raise GoldenError(str(exc).replace("cannot read", "missing or unreadable")) from None


class Goldens:
    """All golden files of one directory, checked against the manifest when first used."""

    def __init__(self, directory=GOLDEN_DIR, files=None):
        self.directory = Path(directory)
        self._files = {}
        if files is not None:  # already in memory and trusted: regenerate.py checking what it built
            self._files, self.hashes = dict(files), {name: None for name in files}
            return
        manifest_path = self._inside(MANIFEST)
        if not self.directory.is_dir():
            raise GoldenError(f"{self.directory}: no such golden directory (it holds {MANIFEST} and the golden files)")
        text = _read(manifest_path)  # a missing or unreadable manifest says so itself
        try:
            manifest = json.loads(text, object_pairs_hook=_no_duplicates(str(manifest_path)))
            self.hashes = {name: entry["sha256"] for name, entry in manifest["files"].items()}
            if not all(isinstance(h, str) for h in self.hashes.values()):
                raise TypeError("every sha256 must be a string")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            why = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise GoldenError(
                f"{manifest_path}: not a golden manifest ({{'files': {{name: {{'sha256': ...}}}}}}): {why}"
            ) from None

    def _inside(self, name):
        """The path of a file of this directory, refused if it (or a symlink) leads outside it."""
        path = self.directory / name
        real, home = path.resolve(), self.directory.resolve()
        if real.parent != home:
            raise GoldenError(
                f"{path}: resolves to {real}, outside {home}: a golden file must live in the golden directory"
            )
        return path

    def file(self, name):
        if name not in self._files:
            if not _FILE_NAME.match(name):
                raise GoldenError(
                    f"golden file {name!r}: must be a plain file name inside golden/ (like doc000_seed123.json)"
                )
            if name not in self.hashes:
                raise GoldenError(f"golden file {name!r}: not listed in {MANIFEST}")
            path = self._inside(name)
            data = _read(path)
            if sha256(data) != self.hashes[name]:
                raise GoldenError(f"{path}: sha256 does not match {MANIFEST}: the file changed since regeneration")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise GoldenError(f"{path}: not UTF-8 text") from None
            self._files[name] = parse(text, str(path))
        return self._files[name]

    def tensor(self, ref):
        """The array a reference 'file.json#tensor' or 'file.json#tensor[i]' names."""
        match = re.fullmatch(r"([^#]+)#(\w+)(?:\[(\d+)\])?", ref)
        if not match:
            raise GoldenError(f"golden reference {ref!r}: must look like 'file.json#tensor' or 'file.json#tensor[2]'")
        file_name, tensor, row = match.groups()
        tensors = self.file(file_name)
        if tensor not in tensors:
            raise GoldenError(f"golden reference {ref!r}: {self.directory / file_name} has no tensor {tensor!r}")
        array = tensors[tensor]
        if row is not None:
            if not array.ndim or int(row) >= array.shape[0]:
                raise GoldenError(
                    f"golden reference {ref!r}: row {row} is outside {self.directory / file_name}'s "
                    f"{tensor!r} of shape {list(array.shape)}"
                )
            array = array[int(row)]
        return array
