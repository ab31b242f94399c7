"""Reading untrusted files in bounded time and memory.

Every file the suite reads (specs, known divergences, golden tensors, the manifest) may come
from a user. A file is read only if it is a regular file, and never more than its byte limit;
YAML is parsed by libyaml, and its node graph is measured before any Python object is built:
nesting depth and the size with every alias expanded are both capped, so an alias bomb (a 40 kB
file that expands to hundreds of millions of nodes) is refused in milliseconds.
"""

import stat
from pathlib import Path

import yaml

MAX_DEPTH = 32  # attention.yaml is 8 levels deep; libyaml's composer recurses in C: 100,000 levels crash the process
MAX_NODES = 100_000  # counted with aliases expanded; attention.yaml has ~3,100


def one_line(message):
    """`message` with every character that is not printable escaped: a key or value from a file may
    hold a newline, NEL or a terminal escape, and an error must stay one honest line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class UnsafeInput(ValueError):
    """A file refused before it was parsed; the message names the file."""


def read_bounded(path, limit, kind):
    """The bytes of a regular file of at most `limit` bytes. A FIFO or a device (/dev/zero) would
    block or never end; a larger file is refused without reading the rest."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UnsafeInput(f"{path}: not a regular file")
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise UnsafeInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UnsafeInput(f"{path}: over the {limit}-byte limit for {kind}")
    return data


# PyPI's PyYAML wheels carry libyaml; a PyYAML built without it falls back to the pure-Python parser,
# ~10x slower but bounded by the same checks.
_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SAFE):
    """libyaml's safe loader (no tag builds an object) that also refuses duplicate mapping keys."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be overridden by explicit keys
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise UnsafeInput(f"line {key_node.start_mark.line + 1}: a mapping key must be a plain value") from None
            if key in seen:
                raise UnsafeInput(f"line {key_node.start_mark.line + 1}: duplicate key {key!r}")
            seen.add(key)
        return super().construct_mapping(node, deep)


def _check_depth(text):
    """Refuse deep nesting from the event stream, stopping at the first event too deep: the parser
    is iterative, the composer is not."""
    depth = 0
    for event in yaml.parse(text, Loader=_SAFE):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeInput(f"line {event.start_mark.line + 1}: nested more than {MAX_DEPTH} deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return ()


def _check_expansion(root):
    """Size and depth of the tree the graph stands for, each alias counted wherever it is used.
    Iterative, memoized per node: linear in the number of distinct nodes, whatever the aliases."""
    size, depth = {}, {}
    on_path = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            # containers only, as _check_depth counts them: a scalar at the bottom adds no nesting
            depth[key] = (not isinstance(node, yaml.ScalarNode)) + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise UnsafeInput(
                    f"line {node.start_mark.line + 1}: more than {MAX_NODES} values once aliases are expanded"
                )
            if depth[key] > MAX_DEPTH:
                raise UnsafeInput(
                    f"line {node.start_mark.line + 1}: nested more than {MAX_DEPTH} deep once aliases are expanded"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise UnsafeInput(f"line {node.start_mark.line + 1}: an alias refers to a node that contains it")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node))


def load_yaml(text):
    """The one YAML document in `text`, or UnsafeInput / yaml.YAMLError. Nothing is constructed
    until the whole graph has been measured."""
    _check_depth(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        try:
            return loader.construct_document(node)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:  # an int past 4,300 digits, a date like 2026-02-31
            if isinstance(exc, UnsafeInput):
                raise
            raise UnsafeInput(f"a value cannot be read: {exc}") from None
    finally:
        loader.dispose()
