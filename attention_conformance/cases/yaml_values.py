"""What the spec's YAML values are: numbers float32 holds, regular lists of them, boolean masks,
golden references. Shared by the loader and by each field's validator (fields.py)."""

import re

FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max: tensor data is float32
GOLDEN_REF = re.compile(
    r"[a-z0-9_]+\.json#[A-Za-z0-9_]+(\[[0-9]+\])?"
)  # used with fullmatch: ASCII only, no trailing newline


def one_of(value, names):
    """`value in names` for a value from YAML, which may be an unhashable list or mapping."""
    return isinstance(value, str) and value in names


def is_int(value, low=0, high=None):
    return isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high)


def is_number(v):
    """A finite number that float32 holds without overflow (an int too big for a float included)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) <= FLOAT32_MAX  # False for NaN, and for inf; int against float compares exactly


def is_number_text(value):
    """Text YAML 1.1 left unread that is a number to anyone else: 2.7e8 (it wants 2.7e+8)."""
    return isinstance(value, str) and re.fullmatch(r"[-+]?[0-9.]+[eE][-+]?[0-9]+", value.strip()) is not None


def numbers(value):
    """(flat numbers, shape) of a number or regular nested list of numbers; None otherwise or ragged."""
    if is_number(value):
        return [value], ()
    if not isinstance(value, list) or not value:
        return None
    parts = [numbers(v) for v in value]
    if any(p is None for p in parts) or len({p[1] for p in parts}) != 1:
        return None
    return [n for p in parts for n in p[0]], (len(value),) + parts[0][1]


def shape_of(value):
    parsed = numbers(value)
    return None if parsed is None else parsed[1]


def bools(value):
    """True for a boolean or a regular (not ragged) nested list of booleans."""

    def as_ints(v):
        return int(v) if isinstance(v, bool) else [as_ints(x) for x in v] if isinstance(v, list) else None

    def all_bools(v):
        return isinstance(v, bool) or (isinstance(v, list) and v and all(map(all_bools, v)))

    return bool(all_bools(value)) and shape_of(as_ints(value)) is not None


def is_golden_ref(value):
    return isinstance(value, str) and GOLDEN_REF.fullmatch(value) is not None
