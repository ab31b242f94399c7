"""How far any correct computation of the oracle's steps may land from the exact answer: a bound derived from the
magnitudes summed, not measured on one computation that may have been exact by luck.

`Bounded` is a float64 array with, beside each value, `err`: the largest |computed - value| of any implementation
that performs the same steps in floating point, in any summation order, with or without fused multiply-add. It
follows forward error analysis (Higham, Accuracy and Stability of Numerical Algorithms, ch. 2-3), every term kept,
not only the first order:

  a sum or dot product of n terms   gamma_n x sum |terms|, gamma_n = n u / (1 - n u), any order; a bias
                                    added to a product may join its sum (addmm): gamma_n x |bias| more
  each arithmetic result            u x |result|
  a x b, a +- b                     |a| e_b + e_a |b| + e_a e_b, e_a + e_b
  a / b                             (e_a + |a / b| e_b) / (|b| - e_b)   (inf when e_b >= |b|)
  a constant (a scale 1/sqrt(H))    rounded to the dtype: u_store of it
  the softmax                       as a whole (softmax() says how): its terms share a denominator
  a step's result stored            u_store x |result|, where the next step (or the caller) takes it
  the oracle's own products         K 2**-58 of the row's and column's largest magnitudes (deterministic.py)

u_store is the dtype's unit roundoff. Within a step (a product, the scale, the softmax, the blend) sums and
elementwise math run at u = u_accumulate: the dtype's own in float32 and float64, float32's in float16 and bfloat16,
where the frameworks judged here accumulate. A framework that accumulates, or keeps a softmax's insides, in the half
type is outside the bound: a declared divergence.

The reference (adapters/reference/) runs its own steps on Bounded arrays (tolerance_model.bound): its value is exact,
its err the bound. A NumPy call without a rule here (np.sqrt has one) raises: no step drops its bound silently."""

import contextlib
import contextvars
import math

import ml_dtypes
import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from attention_conformance import deterministic, remembered

# Within 1 ULP for Sleef (torch), 1-2 for Eigen (TensorFlow, XLA) and MLAS's softmax (ONNX Runtime),
# as their sources state; 4 ULP leaves room for a vectorised exp none of them documents.
EXP_ULPS = 4
_units = contextvars.ContextVar("units", default=None)


def unit_roundoff(dtype):
    return float(ml_dtypes.finfo(dtype).eps) / 2


@contextlib.contextmanager
def computed_in(dtype, sums_in_dtype=False):
    """Bounds for results stored in `dtype` (a NumPy or ml_dtypes name), each step's sums in float32 where the dtype is
    narrower, or with `sums_in_dtype` in the dtype itself (MLX's half precision). Yields a list that gets the largest
    |value| of a stored step past the dtype's largest number: there it overflows, and the bound says nothing."""
    store = unit_roundoff(dtype)
    accumulate = store if sums_in_dtype else min(store, unit_roundoff("float32"))
    overflowed = []
    token = _units.set((store, accumulate, dtype, overflowed))
    try:
        yield overflowed
    finally:
        _units.reset(token)


def units():
    """The store and accumulate units and stored dtype, or None outside computed_in: part of a remembered key."""
    found = _units.get()
    return None if found is None else (found[0], found[1], str(np.dtype(found[2])))


def overflows():
    """computed_in's list of overflowing steps, or None outside it: a remembered answer appends its own again."""
    found = _units.get()
    return None if found is None else found[3]


@contextlib.contextmanager
def in_float32_at_least():
    """Steps a framework computes in float32 whatever the dtype: RoPE's positions, frequencies and angles (HF's
    rotary embedding, MLX's fast.rope and ONNX's caches keep them there; in bfloat16 position 257 is 256). A
    result made here and stored outside rounds to the dtype then (stored)."""
    store, _, _, overflowed = _units.get()
    single = unit_roundoff("float32")
    token = _units.set((single, single, np.float32, overflowed)) if store > single else None
    try:
        yield
    finally:
        if token is not None:
            _units.reset(token)


def _store():
    return _units.get()[0]


def _accumulate():
    return _units.get()[1]


def _gamma(n):  # of a sum's length, or of each row's count of terms (an exact 0 adds nothing, rounds nothing)
    nu = np.asarray(n, dtype=np.float64) * _accumulate()
    return np.where(nu < 1, nu / np.where(nu < 1, 1 - nu, 1.0), np.inf)[()]


class Unbounded(TypeError):
    """A step this module has no rule for (dropout's np.where): the computation has no derived bound."""


def _parts(a):
    if isinstance(a, Bounded):
        return a.value, a.err
    value = np.asarray(a, dtype=np.float64) if not isinstance(a, (bool, np.bool_)) else a
    return value, np.zeros(np.shape(value))


class Bounded(NDArrayOperatorsMixin):
    """A float64 value and the bound on its error (see the module's doc)."""

    __array_priority__ = 100

    def __init__(self, value, err=None):
        if _units.get() is None:
            raise RuntimeError("Bounded arrays need bounds.computed_in(dtype)")
        self.value = np.asarray(value, dtype=np.float64)
        self.err = np.broadcast_to(0.0 if err is None else err, self.value.shape)  # an input's: a read-only 0, no
        self.err = self.err if err is None else self.err.copy()  # bytes (a decode's k, v are GBs) until written
        self.terms = 0  # the length of the sum that made it, when it is a product's: see _add

    def remembered_as(self):
        """What makes this array what it is, for remembered.py: a bound answer is given again only for the same
        values, bounds and sum length."""
        return self.value, np.asarray(self.err, dtype=np.float64), np.asarray(self.terms, dtype=np.float64)

    def __array__(self, *args, **kwargs):
        raise Unbounded("a Bounded array met a NumPy call that would drop its bound: bound that step in bounds.py")

    shape = property(lambda self: self.value.shape)
    ndim = property(lambda self: self.value.ndim)

    @property
    def T(self):  # the gradients' transposes: a step with no rule here, so no bound, as for a NumPy call
        raise Unbounded("bounds: .T is not bounded")

    def __getitem__(self, key):
        return Bounded(self.value[key], self.err[key] if self.err.flags.writeable else None)

    def __setitem__(self, key, other):
        value, err = _parts(other)
        self.err = self.err if self.err.flags.writeable else np.zeros(self.value.shape)
        self.value[key], self.err[key] = value, err

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise Unbounded(f"bounds: {ufunc.__name__}.{method} with {sorted(kwargs)} is not bounded")
        rule = _RULES.get(ufunc)
        if rule is None:
            raise Unbounded(f"bounds: np.{ufunc.__name__} is not bounded")
        with np.errstate(all="ignore"):
            return rule(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        rule = _FUNCTIONS.get(func)
        if rule is None:
            raise Unbounded(f"bounds: np.{func.__name__} is not bounded")
        return rule(*args, **kwargs)


def _rounded(value, err):
    """A step's own arithmetic: rounded at u_accumulate (float32 inside a half-precision step)."""
    return Bounded(value, err + _accumulate() * np.abs(value))


def stored(a):
    """`a` as the next step receives it, stored in the dtype: a computed value (err > 0) rounds once more, from
    u_accumulate to u_store, plus, where it may be subnormal, a step of that grid (issue 58, 74). Given inputs stay
    exact; their largest is found without |a|, a copy (a 131,072-key decode's k and v: 1.6 s of its 22, issue 73)."""
    if not isinstance(a, Bounded):
        return a
    limits, value = ml_dtypes.finfo(_units.get()[2]), a.value
    if not math.isfinite(largest := max(float(np.max(value, initial=0.0)), -float(np.min(value, initial=0.0)))):
        largest = float(np.max(np.where(np.isfinite(value), np.abs(value), 0.0), initial=0.0))
    if largest > float(limits.max):
        _units.get()[3].append(largest)
    if not a.err.flags.writeable:  # an input (err None): nothing rounds it
        return a
    normal, subnormal, more = float(limits.smallest_normal), float(limits.smallest_subnormal), _store() - _accumulate()

    def rounded(value, err):  # elementwise, in pieces the cache holds
        tiny = np.where((magnitude := np.abs(value)) - err < normal, subnormal, 0.0)
        return (np.where(err > 0, err + more * magnitude + tiny, err),)

    return Bounded(a.value, deterministic.in_pieces(rounded, value, a.err)[0])


def _constant(a):
    """err of a plain operand: none for an array (given in the dtype), 3 u_store for a number the implementation
    computes (1/sqrt(d_k): root, reciprocal, an rsqrt's last place; issue 58, tests/run/test_false_alarms_scale.py)."""
    return 0.0 if isinstance(a, Bounded) or np.ndim(a) > 0 else 3 * _store()


def _folded(a, b):
    """What adding b to a product's result may cost beyond one rounding: a fused x @ W + b (BLAS's beta,
    mx.addmm, torch.addmm) starts its accumulator at b, so each of the product's K additions rounds at b's
    scale too: gamma_K |b| (found by the fuzzer: MLX's Linear, 1.6 ULP where one rounding allows 0.5)."""
    cost = 0.0
    for x, y in ((a, b), (b, a)):
        if getattr(x, "terms", 0):
            cost = cost + _gamma(x.terms) * np.abs(_parts(y)[0])
    return cost


def _add(a, b):
    (va, ea), (vb, eb) = _parts(a), _parts(b)
    return _rounded(va + vb, ea + eb + _folded(a, b))


def _subtract(a, b):
    (va, ea), (vb, eb) = _parts(a), _parts(b)
    return _rounded(va - vb, ea + eb + _folded(a, b))


def _multiply(a, b):
    (va, ea), (vb, eb) = _parts(a), _parts(b)
    ea, eb = ea + _constant(a) * np.abs(va), eb + _constant(b) * np.abs(vb)
    return _rounded(va * vb, np.abs(va) * eb + ea * np.abs(vb) + ea * eb)


def _divide(a, b):
    (va, ea), (vb, eb) = _parts(a), _parts(b)
    ea, eb = ea + _constant(a) * np.abs(va), eb + _constant(b) * np.abs(vb)
    value = va / vb
    room = np.abs(vb) - eb
    err = np.where(room > 0, (ea + np.abs(value) * eb) / np.where(room > 0, room, 1.0), np.inf)
    return _rounded(value, np.where((va == 0) & (ea == 0), 0.0, err))  # an exact zero over anything stays zero


def _sqrt(a):  # RMSNorm's root: v within e moves it by e / (sqrt(v) + sqrt(v - e)) at most; an rsqrt errs 2 units
    value, err = _parts(a)
    return Bounded(r := np.sqrt(value), err / (r + np.sqrt(np.maximum(value - err, 0.0))) + 2 * _accumulate() * r)


_RULES = {np.add: _add, np.subtract: _subtract, np.multiply: _multiply, np.true_divide: _divide, np.sqrt: _sqrt}


def _both(func):
    """A function that moves elements without arithmetic: applied to the value and the bound alike."""

    def moved(a, *args, **kwargs):
        value, err = _parts(a)
        return Bounded(func(value, *args, **kwargs), func(err, *args, **kwargs))

    return moved


def _joined(func):
    def joined(arrays, *args, **kwargs):
        parts = [_parts(a) for a in arrays]
        return Bounded(func([v for v, _ in parts], *args, **kwargs), func([e for _, e in parts], *args, **kwargs))

    return joined


def _split(a, *args, **kwargs):
    value, err = _parts(a)
    return [Bounded(v, e) for v, e in zip(np.split(value, *args, **kwargs), np.split(err, *args, **kwargs))]


# What the reference's steps do to Bounded arrays besides arithmetic; any other NumPy function raises.
_FUNCTIONS = {np.split: _split, np.concatenate: _joined(np.concatenate), np.stack: _joined(np.stack)}
_FUNCTIONS |= {f: _both(f) for f in (np.swapaxes, np.ravel, np.repeat, np.reshape, np.broadcast_to)}
_FUNCTIONS |= {np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim}


# --- the steps with sums and exponentials: the reference calls these on Bounded arrays ----------------


def matmul(a, b):
    if np.ndim(b) == 1 or np.ndim(a) == 1:  # matmul's rules for vectors, as deterministic.matmul's
        return matmul(a, b[:, None])[..., 0] if np.ndim(b) == 1 else matmul(a[None, :], b)[..., 0, :]
    (va, ea), (vb, eb) = _parts(a), _parts(b)
    K = va.shape[-1]
    # The magnitudes need no exact products: BLAS's float64 ones, their own rounding (gamma_K of float64) added,
    # cost a fraction of the oracle's. The value stays the oracle's: BLAS's last bits, different on every CPU,
    # would move a float64 bound by 1% through the softmax's interval (tox -e portability); tolerance_model.bound
    # rounds the result up to 12 bits. In float64 the magnitudes are the oracle's too: there the interval's spread
    # turns BLAS's last bits into 10% of the bound (portability found 18 float64 bounds differing).
    blas = 1 + 2 * K * 2.0**-53 / (1 - K * 2.0**-53)  # 2 gamma_K of float64: BLAS's own float64 sums, relative
    product = deterministic.matmul if _store() <= 2.0**-53 else (lambda p, q: (p @ q) * blas)
    # ea |b| + |a| eb + ea eb + gamma_K |a||b| in as few products as its terms need (the bound was most of a first run,
    # issue 54): an operand given exactly drops its terms; 1 + 2**-46 covers the groupings' own roundings.
    gamma, (ma, mb) = _gamma(K), (np.abs(va), np.abs(vb))
    if not math.isfinite(gamma):  # a bound that says nothing, as the terms say it
        err = product(ea, mb) + product(ma, eb) + product(ea, eb) + gamma * product(ma, mb)
    elif not np.any(eb):  # weights @ values: a hidden key's weight is an exact 0 (issue 74: causal rows sum half)
        err = product(ea + _gamma(np.count_nonzero((va != 0) | (ea != 0), axis=-1, keepdims=True)) * ma, mb)
    elif not np.any(ea):
        err = product(ma, eb + gamma * mb)
    else:
        err = product(ea, mb + eb) + product(ma, eb + gamma * mb)
    err = err * (1 + 2.0**-46)
    # The oracle is exact to within K 2**-58 of its row's largest |a| times its column's largest |b| (deterministic.
    # matmul): an entry far below both is known less well than float64 holds it (tests/run/test_false_alarms.py).
    oracle = K * 2.0**-58 * ma.max(axis=-1, keepdims=True, initial=0.0) * mb.max(axis=-2, keepdims=True, initial=0.0)
    product = _rounded(remembered.product(deterministic.matmul, va, vb), err + oracle)
    product.terms = K
    return product


def sum(a, axis=-1, keepdims=False):
    value, err = _parts(a)
    size = deterministic.sum(np.abs(value), axis=axis, keepdims=keepdims)
    total_err = deterministic.sum(err, axis=axis, keepdims=keepdims)
    return _rounded(
        deterministic.sum(value, axis=axis, keepdims=keepdims), total_err + _gamma(value.shape[axis]) * size
    )


def _others(terms):
    """Each term's row sum without it, never as sum - term: where one term dwarfs the rest (e^460 beside e^389,
    logits uncertain by hundreds) that difference is 0 and the interval collapsed (found by the fuzzer: JAX's
    bfloat16 tie of two logits 118 apart, the max's weight bounded to 0.99 where 0.5 is right)."""
    largest = terms.argmax(axis=-1)[..., None]
    is_largest = np.arange(terms.shape[-1]) == largest
    rest = deterministic.sum(np.where(is_largest, 0.0, terms), keepdims=True)  # every term but the largest
    return np.where(is_largest, rest, np.take_along_axis(terms, largest, axis=-1) + np.maximum(rest - terms, 0.0))


def softmax(scaled, hidden=None):
    """The softmax over the last axis (hidden keys get 0, a row with none visible 0 everywhere), bounded as a whole: its
    terms are positive and share one denominator, so with each input within D_l the weight w_j lies between
        a_j e^-D_j / (a_j e^-D_j + sum_l!=j a_l e^D_l)  and  a_j e^D_j / (a_j e^D_j + sum_l!=j a_l e^-D_l),
    a_l = exp(s_l - max s), finite however large D is (the parts' bounds would divide by nothing). The row's max that
    implementations subtract cancels exactly; its subtraction rounds (u |s - max|), exp errs EXP_ULPS in numerator and
    denominator, the sum of the row's visible terms gamma of their count, the division u. Found by
    tests/run/test_false_alarms.py: log-sum-exp's shift (below)."""
    value, err = _parts(stored(scaled))
    hidden = np.zeros(value.shape, dtype=bool) if hidden is None else np.broadcast_to(hidden, value.shape)
    # log n for each count of visible keys n: libm's, not NumPy's SIMD; the subnormals' start, for the floor below.
    logs = np.array([math.log(max(c, 2)) for c in range(value.shape[-1] + 1)])
    normal = float(ml_dtypes.finfo(_units.get()[2]).smallest_normal)
    with np.errstate(all="ignore"):  # a row at a time is the whole's bytes: a few rows fill a piece of the cache
        weights = deterministic.in_pieces(lambda *rows: _weights(*rows, logs, normal), value, err, hidden, rows=True)
    return Bounded(*weights)


def _weights(value, err, hidden, logs, normal):
    """softmax's (weights, bound) on rows of `value`, each within `err`, with `hidden` keys."""
    filled = np.where(hidden, -np.inf, value)
    top = filled.max(axis=-1, keepdims=True)
    empty = np.isneginf(top)
    shifted = filled - np.where(empty, 0.0, top)
    a = np.where(hidden, 0.0, deterministic.exp(shifted))
    n = np.count_nonzero(~hidden, axis=-1, keepdims=True)  # the keys held beyond these are hidden too
    # Subtracting the max rounds, in the dtype itself where the softmax is written elementwise (jax.nn.softmax in
    # bfloat16: s - max of 56.8 rounds by 0.06, e^0.06 is 6% of a weight; found by the fuzzer, JAX seed 16), as its exp
    # terms are stored in it before they are summed.
    d = np.where(hidden, 0.0, err + _store() * np.abs(shifted))
    # exp(s - max + d), not a e^d: a term whose a underflows (a gap of 800 between bfloat16 logits of 1e5, each
    # uncertain by hundreds) may still tie the max (found by the fuzzer: 0.5 where exact is 0).
    up = np.where(hidden, 0.0, deterministic.exp(np.minimum(shifted + d, 700.0)))
    down = np.where(hidden, 0.0, deterministic.exp(shifted - d))
    Z = deterministic.sum(a, keepdims=True)
    w = np.where(empty, 0.0, a / np.where(empty, 1.0, Z))
    # A softmax through log-sum-exp, exp(s - (max + log Z)), shifts every exponent by the rounding of max + log Z and of
    # s - (max + log Z) (u (|max| + 2 log n)) and by log's own error (EXP_ULPS ULP of log Z <= log n).
    shift = _accumulate() * (np.abs(np.where(empty, 0.0, top)) + (2 + 2 * EXP_ULPS) * logs[n])
    # Written so that an `up` or a sum of them beyond float64 gives the limits 1 and 0, never inf / inf.
    # deterministic.exp, not np.exp: NumPy's exp differs in its last bit between SIMD paths, and in float64 that bit is
    # 1% of the spread below (tox -e portability).
    highest = np.where(up > 0, 1.0 / (1.0 + _others(down) / up) * deterministic.exp(np.minimum(shift, 700.0)), 0.0)
    lowest = np.nan_to_num(down / (down + _others(up)), nan=0.0) * deterministic.exp(-shift)
    spread = np.maximum(highest - w, w - lowest)
    own = highest * ((4 * EXP_ULPS + 1) * _accumulate() + 2 * _store() + _gamma(n))
    # A weight that may be subnormal may be any, or 0 where the kernel flushes subnormals (TF.js' WebAssembly backend:
    # 7.8e-45 came back 0). Only there: float16's 6.1e-5 on every weight was 0.1 of a 2048-key output.
    floor = np.where(lowest - own < normal, normal, 0)
    err = np.where(hidden | empty, 0.0, np.nan_to_num(spread, nan=np.inf) + own + floor)
    # A weight lies in [0, 1] however uncertain its logits: no bound beyond that (and no inf x 0 after it).
    return w, np.minimum(err, 1.0 + own + floor)
