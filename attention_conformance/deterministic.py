"""float64 arithmetic that gives the same bytes on every CPU, BLAS kernel and thread count.

The oracle's answers are committed (golden/) and compared across machines, so they must not
depend on the machine that computed them. Two things in plain NumPy do (measured, issue 26):
a float64 matmul's summation order follows the BLAS kernel (OPENBLAS_CORETYPE=Prescott changes
the last digits of six golden files), and np.exp is NumPy's own AVX-512 code where the CPU has
it and libm's elsewhere (4.5% of float64 results 1 ULP apart, NPY_DISABLE_CPU_FEATURES=X86_V4).

Everything here is built from IEEE-754 basic operations, which are correctly rounded, so their
result does not depend on how they are vectorised:

  matmul  error-free splitting (Ozaki, Ogita, Oishi, Rump 2012): each operand is cut into
          slices of few enough bits that every product of slices, and every partial sum of K of
          them in any order, is an exact float64. BLAS then computes each slice product with no
          rounding at all, whatever its kernel, blocking, threads or FMA use; the few slice
          products are added in a fixed order. Accuracy: the error is below K * 2**-58 of (the
          row's largest magnitude x the column's) plus the final roundings, a few ULP of the
          result on ordinary data (an entry far below its row's scale is less accurate).
          Only entries that a NaN or an inf reaches are left to BLAS.
  sum     pairwise, in a fixed order of elementwise additions: error below log2(n) ULP of
          the sum of magnitudes, like np.sum's, but the same order on every machine.
  exp     range reduction and a fixed polynomial, elementwise: within 2 ULP of exp.
  cos/sin the same, by multiples of pi/2: within 2 ULP of |angle| + 1 (RoPE's angles).
  tanh    sinh / cosh by their series near 0, 1 - 2 / (exp(2|x|) + 1) beyond: within 3 ULP (soft-capping).
"""

import math

import numpy as np

_MANTISSA = 53  # float64 significand bits
_COVERED = 60  # bits of each row's (column's) largest magnitude kept across slices
# Elementwise work in pieces that stay in the CPU's cache through their passes (exp's polynomial has 30): 3x faster
# on a GPT-2-shaped score matrix than whole, and elementwise, so the same bytes.
_PIECE = 1 << 15


def _exponents(a, axis):
    """e, |a| < 2**e along `axis` (e = 0 for a zero row: its slices are zero): without |a|, a copy as large as a."""
    largest = np.maximum(np.max(a, axis=axis, keepdims=True), -np.min(a, axis=axis, keepdims=True))
    return np.frexp(largest)[1]


def _split(a, e, bits, count):
    """Integer-valued arrays q[0..count-1], |q[p]| < 2**bits, with a = sum_p q[p] * 2**(e - (p+1)*bits) up to the
    bits of `a` below 2**(e - count*bits), |a| < 2**e. In integers, products stay far from overflow and underflow. A
    slice that is zero everywhere is None: float16 and bfloat16 inputs (and float32 weights) fill only the first one
    or two, and a product with it would add nothing. Its passes are quick where the CPU's cache holds `a`."""
    rest, q = np.ldexp(a, bits - e), []  # a power of two: exact
    for n in range(count):
        if n:
            rest *= 2.0**bits  # exact, a power of two
        whole = np.trunc(rest)
        q.append(whole if whole.any() else None)
        rest -= whole  # exact: the fraction left
        if not rest.any():  # half-precision inputs end after the first slice or two
            break
    return q + [None] * (count - len(q))


def _slices(a, axis, bits, count):
    """(_split's slices of a whole, e along `axis`), cut _PIECE elements at a time along the longer of the last two
    axes so that each piece's passes stay in the CPU's cache. Elementwise, so the same bytes."""
    e = _exponents(a, axis)
    q = [np.zeros(a.shape) for _ in range(count)]  # a page no piece writes is never touched: it costs no memory
    filled = [False] * count
    along = -1 if a.shape[-1] >= a.shape[-2] else -2
    step = max(1, _PIECE * a.shape[along] // max(a.size, 1))
    for start in range(0, a.shape[along], step):
        cut = (Ellipsis, slice(start, start + step)) + ((slice(None),) if along == -2 else ())
        for n, whole in enumerate(_split(a[cut], e[cut if e.shape[along] > 1 else Ellipsis], bits, count)):
            if whole is not None:
                q[n][cut], filled[n] = whole, True
    return [s if f else None for s, f in zip(q, filled)], e


def matmul(a, b):
    """a @ b in float64, the same bytes whatever computes the underlying products."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if b.ndim == 1:  # matmul's rules for vectors: make a matrix, multiply, drop the added axis
        return matmul(a, b[:, None])[..., 0]
    if a.ndim == 1:
        return matmul(a[None, :], b)[..., 0, :]
    K = a.shape[-1]
    if K == 0:
        return a @ b  # zeros
    if not all(math.isfinite(x) for x in (a.max(initial=0), a.min(initial=0), b.max(initial=0), b.min(initial=0))):
        # Only the entries a NaN or an inf reaches come from BLAS: with inf, even they can depend on order. (Found by
        # their largest and smallest first: np.isfinite's copy of a 131,072-key decode's k costs a pass more.)
        rows, columns = np.isfinite(a).all(axis=-1, keepdims=True), np.isfinite(b).all(axis=-2, keepdims=True)
        finite = matmul(np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0))
        return np.where(rows & columns, finite, a @ b)
    # K products of two `bits`-bit integers sum to at most 2**53: every partial sum is exact.
    bits = (_MANTISSA - (K - 1).bit_length()) // 2
    count = -(-_COVERED // bits)
    # Last columns of `a` that are zero in every row add nothing (a causal block of attention weights
    # ends at its last visible key): the slices' products stop before them. b's scale still covers
    # all K rows of b, so the result is the same bytes.
    used = K
    if not a[..., -1].any():
        nonzero = np.flatnonzero(np.any(a != 0, axis=tuple(range(a.ndim - 1))))
        used = nonzero[-1] + 1 if nonzero.size else 1
    # Slice pairs whose bits all lie below the kept range are dropped; the rest, smallest first.
    pairs = sorted(
        ((p, q) for p in range(count) for q in range(count) if p + q < count), key=lambda pq: -(pq[0] + pq[1])
    )
    result = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if math.prod(result) < max(a.size, b.size):
        e_a, e_b = _exponents(a[..., :used], -1), _exponents(b, -2)
        total = _pieced(a[..., :used], b[..., :used, :], e_a, e_b, bits, count, pairs, result)
    else:
        (a_q, e_a), (b_q, e_b) = _slices(a[..., :used], -1, bits, count), _slices(b, -2, bits, count)
        present = [(p, q) for p, q in pairs if a_q[p] is not None and b_q[q] is not None]  # a zero slice adds nothing
        b_q = [q if q is None else q[..., :used, :] for q in b_q]
        total = _pairwise(a_q, b_q, present, bits) if present else np.zeros(result)  # or a or b is zero
    return np.ldexp(total, e_a + e_b)  # (.., M, 1) + (.., 1, N): each row's and column's scale, once


def _pairwise(a_q, b_q, present, bits):
    """The sum of the `present` pairs' products, in their order, a pair at a time: where the result is the largest."""
    total = term = None
    for p, q in present:
        # Scaling a slice by a power of two is exact, and so is every product and partial sum: the integer
        # product scaled (an integer below 2**53), without a pass over the larger result. The smaller operand is
        # scaled: b's slice at GPT-2's shape.
        left, right = a_q[p], b_q[q]
        if left.size < right.size:
            left = np.ldexp(left, -(p + q + 2) * bits)
        else:
            right = np.ldexp(right, -(p + q + 2) * bits)
        if total is None:
            total = np.matmul(left, right)
            continue
        # Each later product into one buffer: a fresh GPT-2-sized result per product cost more in page faults
        # than in its multiply-adds.
        term = np.matmul(left, right, out=term)
        total += term
    return total


def _pieced(a, b, e_a, e_b, bits, count, pairs, result):
    """The sum of the pairs' products, in their order, where the `result` is smaller than an operand (a decode's
    q k^T and its weights times v: 4 query heads against 131072 keys; a block's weights times v): the larger operand
    cut _PIECE elements at a time along its longer axis, K or its own, each piece split and multiplied while the
    CPU's cache holds it (whole, the slices went to memory and back: a decode's q k^T 0.29 -> 0.15 s, measured). The
    slices' products and their partial sums are exact integers however K is cut: the bytes of the whole split."""
    larger = a if a.size >= b.size else b
    free = larger.shape[-2] if larger is a else larger.shape[-1]
    K = a.shape[-1]
    step = max(1, _PIECE * max(K, free) // max(larger.size, 1))
    # Along its own axis, the larger's pieces each meet the whole of the other operand, split once.
    once = None if K >= free else _split(b, e_b, bits, count) if larger is a else _split(a, e_a, bits, count)
    terms, held_a, held_b = {}, [False] * count, [False] * count
    for start in range(0, max(K, free), step):
        cut = slice(start, start + step)
        if once is None:
            place = None  # each piece's products are partial sums of the whole's
            a_q, b_q = _split(a[..., cut], e_a, bits, count), _split(b[..., cut, :], e_b, bits, count)
        elif larger is a:
            place = (Ellipsis, cut, slice(None))
            a_q, b_q = _split(a[..., cut, :], e_a[..., cut, :], bits, count), once
        else:
            place = (Ellipsis, cut)
            a_q, b_q = once, _split(b[..., cut], e_b[..., cut], bits, count)
        held_a = [h or s is not None for h, s in zip(held_a, a_q)]
        held_b = [h or s is not None for h, s in zip(held_b, b_q)]
        for p, q in pairs:
            if a_q[p] is None or b_q[q] is None:
                continue
            term = np.matmul(a_q[p], b_q[q])
            term *= 2.0 ** (-(p + q + 2) * bits)  # a power of two: exact
            if (p, q) not in terms:
                terms[p, q] = np.zeros(result)
            whole = terms[p, q]
            if place is None:
                whole += term
            else:
                whole[place] = term
    # A pair whose slices both hold bits somewhere, but never in one piece, is a zero the whole split adds too.
    present = [(p, q) for p, q in pairs if held_a[p] and held_b[q]]
    total = np.zeros(result)
    for n, pq in enumerate(present):
        if n == 0:
            total = terms.get(pq, total)
        else:
            total += terms.get(pq, 0.0)
    return total


def sum(a, axis=-1, keepdims=False):
    """np.sum along one axis, pairwise in a fixed order of elementwise additions."""
    rest = np.moveaxis(np.asarray(a, dtype=np.float64), axis, -1)
    if rest.shape[-1] == 0:
        rest = np.zeros(rest.shape[:-1] + (1,))
    while rest.shape[-1] > 1:
        half = rest.shape[-1] // 2
        paired = rest[..., :half] + rest[..., half : 2 * half]
        rest = np.concatenate([paired, rest[..., 2 * half :]], axis=-1)  # an odd last element waits a round
    total = rest[..., 0]
    return np.expand_dims(total, axis) if keepdims else total


# exp(x) = 2**k exp(r), x = k ln2 + r, |r| <= ln2 / 2. ln2 in two parts (fdlibm's), the first with
# its low 21 bits zero, so k * _LN2_HI is exact. Taylor to degree 14: truncation below 2**-62 on
# |r| <= 0.35; the fixed Horner order adds about 1 ULP.
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(14, -1, -1))


def in_pieces(func, *arrays, rows=False):
    """func(*arrays) (arrays of one shape, results of it too) computed _PIECE elements at a time, or as few whole rows
    of the last axis as hold them where func works along rows (rows=True): each piece's passes stay in the CPU's
    cache, where whole each went to memory and back (a softmax's bound: 40 of them). Elementwise or row by row, so
    the same bytes as whole."""
    shape = arrays[0].shape
    width = (shape[-1] if rows else 1) if shape else 1
    # A row wider than a piece is computed whole: no cache holds it, and whole is fewer calls.
    if arrays[0].size <= _PIECE or not 0 < width <= _PIECE:
        return func(*arrays)
    flat = [np.reshape(a, (-1, width)) for a in arrays]
    step, found = max(1, _PIECE // width), None
    for start in range(0, flat[0].shape[0], step):
        got = func(*(a[start : start + step] for a in flat))
        found = found or [np.empty(flat[0].shape, dtype=g.dtype) for g in got]
        for whole, piece in zip(found, got):
            whole[start : start + step] = piece
    return tuple(whole.reshape(shape) for whole in found)


def exp(x):
    """np.exp in float64, elementwise from basic operations: the same bytes on every machine."""
    x = np.asarray(x, dtype=np.float64)
    return x if x.size == 0 else in_pieces(lambda piece: (_exp(piece),), x)[0]


def _exp(x):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        clipped = np.clip(x, -746.0, 710.0)  # beyond these exp is 0 or inf; keeps k in ldexp's range
        k = np.rint(clipped / math.log(2))
        r = (clipped - k * _LN2_HI) - k * _LN2_LO
        p = np.full_like(r, _TAYLOR[0])
        for c in _TAYLOR[1:]:
            p *= r
            p += c
        # In two steps: 2**k alone underflows for k < -1022 while p * 2**k is still subnormal.
        half = np.floor(k / 2)
        out = np.ldexp(np.ldexp(p, half.astype(np.int32)), (k - half).astype(np.int32))
    return np.where(np.isnan(x), x, out)


# cos and sin: x = k pi/2 + r, |r| <= pi/4 (plus a rounding), pi/2 in fdlibm's parts (pio2_1, pio2_2, pio2_3 of
# 33 bits each, so k * part is exact for |k| < 2**20, and pio2_3t), then Taylor in r: truncation below 2**-80.
_PIO2 = tuple(
    float.fromhex(h)
    for h in ("0x1.921fb54400000p+0", "0x1.0b4611a600000p-34", "0x1.3198a2e000000p-69", "0x1.b839a252049c1p-104")
)
_SIN = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(12, -1, -1))
_COS = tuple((-1) ** n / math.factorial(2 * n) for n in range(13, -1, -1))
LARGEST_ANGLE = 2.0**19 * math.pi / 2  # k stays below 2**19, where the parts' products are exact


def _horner(coefficients, z):
    p = np.full_like(z, coefficients[0])
    for c in coefficients[1:]:
        p *= z
        p += c
    return p


def cos_sin(x):
    """(np.cos(x), np.sin(x)) in float64 from basic operations: the same bytes on every machine. Raises ValueError
    for an angle beyond LARGEST_ANGLE (about 8e5 radians), where the reduction's parts stop being exact."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    if np.any(np.abs(x[finite]) > LARGEST_ANGLE):
        raise ValueError(f"an angle of {np.abs(x[finite]).max():.4g} radians: cos_sin takes |angle| <= 8e5")
    with np.errstate(invalid="ignore"):
        k = np.rint(np.where(finite, x, 0.0) / (math.pi / 2))
        r = np.where(finite, x, 0.0)
        for part in _PIO2:
            r = r - k * part
        z = r * r
        s, c = r * _horner(_SIN, z), _horner(_COS, z)
        quadrant = np.mod(k, 4)
        sin = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [s, c, -s], -c)
        cos = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [c, -s, -c], s)
    nan = np.where(finite, 0.0, np.nan)  # cos and sin of inf or NaN are NaN
    return cos + nan, sin + nan


# tanh: below 0.625 sinh and cosh by their series (truncation below 2**-70), tanh their quotient; beyond, from exp,
# where 1 - 2 / (e^2|x| + 1) keeps at least half its bits (>= 0.55).
_SINH = tuple(1.0 / math.factorial(2 * n + 1) for n in range(10, -1, -1))
_COSH = tuple(1.0 / math.factorial(2 * n) for n in range(10, -1, -1))


def tanh(x):
    """np.tanh in float64 from basic operations: the same bytes on every machine."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        z = x * x
        near = x * _horner(_SINH, z) / _horner(_COSH, z)
        far = np.sign(x) * (1 - 2 / (exp(2 * np.minimum(np.abs(x), 40.0)) + 1))  # past 20, tanh is 1 in float64
    return np.where(np.abs(x) < 0.625, near, far)
