"""Bug or rounding? The oracle and one tolerance model for attention on any input, in any dtype.

One model for every input: the spec's (`run` judges the reference on the same inputs by it; the
spec's named tolerances keep the documents' numbers and golden tensors) and everyone else's
(`explain`, `fuzz`, the model sweep). For an output in dtype d, elementwise,

    |got - exact| <= k_d x B_d + E_d

  exact  float64 on the inputs as given, in deterministic arithmetic (the same bytes on every CPU);
  E_d    the derived bound (bounds.py): how far any correct computation of the same steps in d lands,
         in any summation order, from the magnitudes it sums (gamma_n x sum |terms| per sum, every
         stored result rounded, every error carried through scale, softmax and blend). It never
         collapses where one computation happened to be exact;
  B_d    the plain baseline, max |plain - exact| over the tensor, plain being the same computation
         with every step's inputs rounded to d and its result stored in d (reference.rounding_to). In
         float64 that is exact itself, so B is float32's plain error scaled by 2**-53 / 2**-24. k_d x B_d
         is FlashAttention's rule (k = 2) kept as the empirical term.

An element the exact computation makes exactly zero with a bound of zero (the weight of a hidden key)
must be exactly zero: every implementation computes it without rounding, and `run` asks the same
("a query sees a later key"). k per dtype is data (spec/model.yaml). NumPy only.
"""

import contextlib
import dataclasses
import math

import ml_dtypes
import numpy as np

from attention_conformance import bounds, elementary, safe_io
from attention_conformance.adapters import reference
from attention_conformance.contract.ops import OPS
from attention_conformance.dtypes import DTYPES, np_dtype
from attention_conformance.margin import compare
from attention_conformance.paths import SPEC_DIR
from attention_conformance.run import oracle_cache

MODEL_FILE = SPEC_DIR / "model.yaml"
_STAND_IN = {"float64": ("float32", 2.0**-53 / 2.0**-24)}  # dtype -> (plain dtype, factor on its error)


class BadInput(ValueError):
    """Input the judge cannot take; the message is one line saying what to change."""


class Overflow(ArithmeticError):
    """A step of the computation, stored in the dtype, exceeds its largest number: the plain computation
    overflows there (a kernel that orders the steps otherwise may not), and the model cannot judge it."""


def model(path=MODEL_FILE):
    """{dtype: k} from spec/model.yaml."""
    raw = safe_io.load_yaml(safe_io.read_bounded(path, 1 << 20, "model").decode())
    try:
        found = {d: float(raw[d]["k"]) for d in DTYPES}
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{path}: every dtype ({', '.join(DTYPES)}) needs a number k ({exc!r})") from None
    bad = [d for d, k in found.items() if not k >= 0]
    if bad:
        raise BadInput(f"{path}: {bad[0]}'s k is {found[bad[0]]!r}; it must be a number >= 0")
    return found


# --- the computation ---------------------------------------------------------------------------


def hidden_keys(T, S, mask=None, causal=False, window=None, position=None, right=0, rows=None):
    """True where query i may not see key j: the user's mask (True = hidden), and with `causal` the
    keys after the query's position, position + i; `position` is the first query's (default S - T: bottom-right
    aligned, the last query sees every key, as the spec states), a number or, per batch row, an integer array
    broadcastable to [..., 1, 1]. A `window` hides the keys at or before position + i - window too
    (conventions.sliding_window) and those after position + i + `right` (0: a causal band). `rows`: only these
    queries' rows (indices among the T)."""
    rows = np.arange(T) if rows is None else np.asarray(rows)
    position = rows[:, None] + (S - T if position is None else np.asarray(position))
    keys = np.arange(S)[None, :]
    hidden = np.zeros(np.broadcast_shapes(position.shape, (rows.size, S)), dtype=bool)
    if causal:
        hidden = hidden | (keys > position)
    if window:
        hidden = hidden | (keys <= position - window) | (keys > position + right)
    return hidden if mask is None else hidden | np.asarray(mask, dtype=bool)


def share_kv_heads(t, num_heads):
    """K/V heads [..., K, S, H] repeated in place to [..., N, S, H] (head n uses K/V head n // (N/K))."""
    return np.repeat(t, num_heads // t.shape[-3], axis=-3)


def attend(
    q,
    k,
    v,
    hidden,
    scale=None,
    rounding=None,
    over_queries=False,
    cap=None,
    sinks=None,
    cap_after_mask=False,
    bias=None,
    bias_before_cap=False,
    keep=None,
):
    """{"scores": q k^T, "scaled", "capped", "masked", "weights", "out"} in float64; q [..., T, H], k and v
    [..., S, H] with the same leading axes (broadcastable), `hidden` broadcastable to [..., T, S]. `scale` None is
    1/sqrt(H). With `rounding` (a dtype name), every step's inputs are rounded to it and results stored in it.
    `cap` soft-caps the scaled scores before the bias and the mask (conventions.softcap, ONNX's Attention and Gemma 2;
    0 is none, "zero" every logit 0); a finite `bias` (broadcastable to [..., T, S]: a float attn_mask, ALiBi's or
    T5's) is added to the capped scores, stored once more; "masked" is the softmax's input, -inf where hidden;
    `sinks` (one logit, or one per head of q's axis -3) joins each row's softmax (conventions.sinks).
    `over_queries` normalises the weights over the wrong axis, `cap_after_mask` caps a hidden key's -inf to
    -cap and `bias_before_cap` caps the biased scores: mistakes `explain` recognises. `keep` names the stages given
    (all by default): rounding the others to the dtype was a tenth of a streamed `explain`."""
    steps = reference.rounding_to(np_dtype(rounding)) if rounding else contextlib.nullcontext()
    stored = (lambda a: np.asarray(a).astype(np_dtype(rounding)).astype(np.float64)) if rounding else (lambda a: a)
    with steps:
        scores = reference.transposed_matmul(q, k)
        if scale is None:
            scaled = reference.scale(scores, q.shape[-1])
        else:
            scores_in, factor = reference._f64(scores, np.float64(scale))
            scaled = scores_in * factor
        (scaled,) = reference._f64(scaled)  # the softmax's input is a step's input too
        capped = scaled
        if bias is not None and bias_before_cap:
            (capped,) = reference._f64(capped + bias)
        if cap == "zero":
            capped = capped * 0.0
        elif cap:
            capped = reference.tanh(capped / cap) * cap
        logits = capped
        if bias is not None and not bias_before_cap:
            (logits,) = reference._f64(logits + bias)
        hidden = np.broadcast_to(hidden, np.shape(logits))
        if cap_after_mask and cap and hidden.any():
            filled = reference._zeros(np.shape(logits), logits)
            filled[...] = logits
            filled[hidden] = -cap  # cap tanh(-inf / cap)
            logits, hidden = filled, np.zeros(hidden.shape, dtype=bool)
        masked = reference._zeros(np.shape(logits), logits)
        masked[...] = logits
        masked[hidden] = -np.inf
        if sinks is not None:
            shape = np.shape(logits)[:-1] + (1,)
            sink = np.broadcast_to(sinks[:, None, None] if np.ndim(sinks) else sinks, shape)
            logits = np.concatenate([logits, sink], axis=-1)
            hidden = np.concatenate([hidden, np.zeros(shape, dtype=bool)], axis=-1)
        if over_queries:
            weights = np.swapaxes(
                reference._masked_softmax(np.swapaxes(logits, -1, -2), np.swapaxes(hidden, -1, -2)), -1, -2
            )
        else:
            weights = reference._masked_softmax(logits, hidden)
        if sinks is not None:
            weights = weights[..., :-1]
        out = reference.blend(weights, v)
    stages = dict(scores=scores, scaled=scaled, capped=capped, masked=masked, weights=weights, out=out)
    return {name: stored(value) for name, value in stages.items() if keep is None or name in keep}


# --- the judgement -----------------------------------------------------------------------------


def bound(dtype, compute, *args, sums_in_dtype=False, **kwargs):
    """E: compute(*args, **kwargs)'s outputs (an array or a dict of them), each replaced by the derived
    bound on its error in `dtype` (None for what is not floating point), its sums in float32 or, with
    `sums_in_dtype`, in the dtype. `compute` is the reference's (or built from its steps); its float
    inputs are taken as given, exactly. Raises Overflow where a step exceeds the dtype's range."""

    def given(a):
        floating = isinstance(a, np.ndarray) and (a.dtype.kind == "f" or a.dtype.name == "bfloat16")
        return bounds.Bounded(np.asarray(a, dtype=np.float64)) if floating else a

    def err(result):
        return _coarse(bounds.stored(result).err) if isinstance(result, bounds.Bounded) else None

    with bounds.computed_in(np_dtype(dtype), sums_in_dtype) as overflowed, np.errstate(all="ignore"):
        result = compute(*map(given, args), **{n: given(v) for n, v in kwargs.items()})
        found = {n: err(r) for n, r in result.items()} if isinstance(result, dict) else err(result)
    if overflowed:
        raise Overflow(f"a step reaches {max(overflowed):.3g}, beyond {dtype}'s largest number")
    return found


def _coarse(err):
    """err rounded up to 12 significant bits: the products' magnitudes come from BLAS, whose last bits
    differ between CPUs (1e-13 relative at 1024 terms), and must not reach the bytes of the bound, its
    cached copy or a verdict; 2^-12 looser at most."""
    with np.errstate(all="ignore"):
        mantissa, exponent = np.frexp(err)
        return np.ldexp(np.ceil(mantissa * 2.0**12) / 2.0**12, exponent)


class Derived:
    """The derived bound as an oracle `calls.outputs` can ask and the oracle cache keep: op(**inputs) ->
    each output's bound E in `dtype`; None where the model has none (a step bounds.py has no rule for,
    dropout's; or a step beyond the dtype's range)."""

    def __init__(self, dtype, sums_in_dtype=False):
        self.dtype, self.sums_in_dtype = dtype, sums_in_dtype
        # What the cached answer depends on: the oracle's modules, the bounds' rules and this model.
        self.__file__ = (*oracle_cache.sources(reference), bounds.__file__, elementary.__file__, __file__)
        self.deciding_inputs, self.DTYPES = reference.deciding_inputs, reference.DTYPES

    def __getattr__(self, op):
        if op not in OPS:
            raise AttributeError(op)
        names = OPS[op][1]

        def compute(**given):
            try:
                return bound(self.dtype, getattr(reference, op), sums_in_dtype=self.sums_in_dtype, **given)
            except (bounds.Unbounded, Overflow):
                return {name: None for name in names} if len(names) > 1 else None

        return compute


def allowed(dtype, exact, plain, derived, k, B=None):
    """What |got - exact| may be, elementwise: k x max|plain - exact| + the derived bound E + one ULP of the dtype
    at exact (last_place); 0 where exact is 0 and E is 0 (nothing there can round). `B`, the baseline taken over the
    whole tensor, where `exact` and `plain` are a piece of it."""
    exact = np.asarray(exact, dtype=np.float64)
    return _allowed(dtype, exact, baseline(dtype, exact, plain) if B is None else B, derived, k)


def _allowed(dtype, exact, B, derived, k):
    derived = np.nan_to_num(np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape), nan=np.inf)
    return np.where((exact == 0) & (derived == 0), 0.0, k * B + derived + last_place(dtype, exact))


# Elements judged at a time: a Llama-3-8B prefill's output is 2**25, and judged whole its temporaries were 1.6 GB
# beside the 1.1 GB the stream had kept (issue 73, measured).
_PIECE = 1 << 21


def _pieces(shape):
    """Index tuples that cut an array of `shape` into consecutive pieces (C order) of at most _PIECE elements, a last
    axis at least: the whole, for an array no larger (or empty)."""
    if math.prod(shape) <= _PIECE:
        yield (Ellipsis,)
        return
    axis = next(a for a in range(len(shape)) if math.prod(shape[a + 1 :]) <= _PIECE)
    step = max(1, _PIECE // max(math.prod(shape[axis + 1 :]), 1))
    for lead in np.ndindex(*shape[:axis]):
        for start in range(0, shape[axis], step):
            yield lead + (slice(start, start + step),)


def _within(at, index):
    """The index in the whole array of `index` in its piece `at`."""
    if at == (Ellipsis,):
        return tuple(int(i) for i in index)
    lead, cut = at[:-1], at[-1]
    return tuple(int(i) for i in lead) + (cut.start + int(index[0]),) + tuple(int(i) for i in index[1:])


def last_place(dtype, exact):
    """One unit in the last place of `dtype` at each finite exact value: E counts each step correctly rounded, and a
    kernel whose last step is faithful instead (a multiply by a reciprocal, an rsqrt, a fused multiply-add, a
    library's exp) returns either neighbour of that, on any element, even one every other computation gets exactly
    (a rotary pass-through dim). A result one ULP from a correct one is a correct result (issue 58: the one-ULP
    wrong adapters, tests/mutants/*__one_ulp_off.py, pass `fuzz` as they pass `run`)."""
    kind = np_dtype(dtype)
    largest = kind.type(ml_dtypes.finfo(kind).max)
    top = float(largest) - float(np.nextafter(largest, kind.type(0)))  # at and beyond the largest number: its ULP
    held = np.abs(np.where(np.isfinite(exact), exact, 0.0))
    below = np.minimum(held, float(np.nextafter(largest, kind.type(0)))).astype(kind)
    return np.where(held >= float(largest), top, np.spacing(below).astype(np.float64))


def baseline(dtype, exact, plain):
    """B: the plain computation's largest error over the tensor (float64's: float32's, scaled)."""
    exact, plain = np.asarray(exact, dtype=np.float64), np.asarray(plain, dtype=np.float64)
    _, factor = _STAND_IN.get(dtype, (dtype, 1.0))
    finite = np.isfinite(exact) & np.isfinite(plain)
    return float(np.abs(plain - exact)[finite].max(initial=0.0) * factor)


def plain_dtype(dtype):
    """The dtype whose plain computation sets dtype's baseline (float64: float32, scaled)."""
    return _STAND_IN.get(dtype, (dtype, 1.0))[0]


@dataclasses.dataclass
class Verdict:
    """One tensor judged: margin = worst |error| / allowed (<= 1 within)."""

    name: str
    dtype: str
    margin: float
    index: tuple
    got: float
    expected: float
    error: float
    limit: float
    ulps: float
    plain_error: float
    derived: float

    @property
    def within(self):
        return self.margin <= 1.0

    def describe(self):
        where = "[" + ", ".join(str(int(i)) for i in self.index) + "]"
        if self.derived == 0 and self.expected == -np.inf:
            return (
                f"{self.name}{where}: got {self.got!r} where the only answer is -inf: a key hidden from this query "
                "(by the mask, the causal order or the bias) scores -inf before the softmax"
            )
        if self.limit == 0 and self.derived == 0 and self.expected == 0:
            return (
                f"{self.name}{where}: got {self.got!r} where the only answer is exactly {self.expected!r}: "
                "nothing there can round (a key hidden from this query by the mask, the window or the causal order "
                "gets probability 0, and a padding query's row is 0, in every correct implementation)"
            )
        return (
            f"{self.name}{where}: got {self.got!r}, expected {self.expected!r}, |error| {self.error:.3g} "
            f"({self.ulps:.3g} ULP of {self.dtype} at the row's scale) against allowed {self.limit:.3g} "
            f"(the derived bound there {self.derived:.3g}, one ULP {float(last_place(self.dtype, self.expected)):.3g}; "
            f"the plain {plain_dtype(self.dtype)} computation's "
            f"error there {self.plain_error:.3g}"
            + (", scaled by 2^-29 to stand in for float64's)" if self.dtype in _STAND_IN else ")")
        )


def judge(name, dtype, got, exact, plain, derived, k, nan_expected=False):
    """The Verdict of `got` (an output in `dtype`) against the exact and plain computations and the
    derived bound; `nan_expected`: a NaN of the exact answer is the answer (a declared side, sides.py)."""
    exact, plain = np.asarray(exact, dtype=np.float64), np.asarray(plain, dtype=np.float64)
    got, derived = np.asarray(got), np.broadcast_to(np.asarray(derived, dtype=np.float64), exact.shape)
    with np.errstate(all="ignore"):
        pieces = list(_pieces(exact.shape))
        B = max(baseline(dtype, exact[at], plain[at]) for at in pieces)
        margin = None
        for at in pieces:  # in order: the first of equal margins is the worst, as argmax's over the whole
            limit = _allowed(dtype, exact[at], B, derived[at], k)
            found, index, error, limit_at = compare(got[at], exact[at], limit, nan_expected)
            if margin is None or (not np.isnan(margin) and (np.isnan(found) or found > margin)):
                margin, worst = found, (at, index, error, limit_at)
        at, index, error, limit_at = worst
        index = _within(at, index)
        expected = float(exact[index]) if exact.ndim else float(exact)
        value = float(got[index]) if got.ndim else float(got)
        row = exact[index[:-1]] if exact.ndim else exact
        # A zero row: the tensor's scale; a zero tensor: the value got's (a ULP of 0 is the smallest subnormal, and
        # "2e+44 ULP" says nothing, as an outside trial found).
        scale = (
            np.abs(np.where(np.isfinite(row), row, 0.0)).max(initial=0.0)
            or max(np.abs(np.where(np.isfinite(exact[at]), exact[at], 0.0)).max(initial=0.0) for at in pieces)
            or (abs(value) if np.isfinite(value) else 0.0)
        )
        unit = float(np.spacing(np.asarray(scale).astype(np_dtype(dtype))))
        ulp_count = error / unit if unit else float("inf")
        plain_error = abs(float(plain[index] if plain.ndim else plain) - expected)
    if np.isnan(value) and not np.isnan(expected):
        error = ulp_count = float("inf")
    at = float(derived[index]) if derived.ndim else float(derived)
    return Verdict(name, dtype, margin, index, value, expected, error, limit_at, ulp_count, plain_error, at)
