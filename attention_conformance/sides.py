"""The sides of the splits the spec names: where frameworks disagree and the spec chose one (conventions in
spec/attention.yaml), the oracle can also compute the other, so a framework that declares it (a convention in
spec/divergences/) is judged against the numbers of its own side rather than excused.

A side is {convention: choice}; the first choice of each is the spec's. The oracle reads the side it computes for
from `of` (adapters/reference/), inside `taking`."""

import contextlib
import contextvars

SIDES = {
    # A row whose every key is hidden: the spec's zeros; the textbook's -inf-then-softmax 0/0; a fill of the dtype's
    # most negative number (or -1e9) that leaves every score equal, so every key gets 1/S.
    "fully_masked_rows": ("zeros", "nan", "uniform"),
    # Fewer queries than keys: the spec's queries as the last T_q of T_k (bottom right); a flag that lets query i see
    # keys 0..i as if the block started at position 0 (top left).
    "causal_alignment": ("bottom_right", "top_left"),
    "sliding_window": ("bottom_right", "top_left"),
    # Llama 4's chunks in a left-padded row: the spec's from its first real token (transformers' chunked_overlay);
    # from index 0 of the padded row (its _legacy_chunked_overlay, "do not correctly account for left padding").
    "chunk_alignment": ("first_token", "position"),
    # keras.layers.Attention's scores are q k^T unless use_scale: the spec's op is scaled dot-product attention.
    "attention_layer_scale": ("scaled", "unscaled"),
}

_taken = contextvars.ContextVar("side", default=())


def problem(side):
    """What is wrong with a side as a divergence states it ({convention: choice}), or None."""
    if not isinstance(side, dict) or not side:
        return "a mapping of a split to the choice the framework makes, e.g. {fully_masked_rows: nan}"
    for name, choice in side.items():
        if name not in SIDES:
            return f"{name!r} is not a split the oracle computes both sides of ({', '.join(SIDES)})"
        if choice not in SIDES[name][1:]:
            others = ", ".join(SIDES[name][1:])
            return f"{name}: {choice!r} is not another side of it ({others}; the spec's is {SIDES[name][0]})"
    return None


@contextlib.contextmanager
def taking(side):
    """Compute the oracle's answers on `side` (a dict, or None for the spec's own)."""
    token = _taken.set(tuple(sorted((side or {}).items())))
    try:
        yield
    finally:
        _taken.reset(token)


def of(name):
    """The choice the oracle computes for one split now: the spec's unless a side is taken."""
    return dict(_taken.get()).get(name, SIDES[name][0])


def taken():
    """The side taken now, as a hashable value: what an answer computed on it depends on (remembered, cache keys)."""
    return _taken.get()


def label(side):
    """A side as text, for a cache key and a message: 'fully_masked_rows=nan', or '' for the spec's own."""
    return ", ".join(f"{name}={choice}" for name, choice in sorted((side or {}).items()))
