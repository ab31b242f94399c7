"""`explain` at a model's own sizes (issue 73): the oracle, the plainly rounded attention and the derived bound
computed a block of query rows at a time, and one K/V head with the query heads that share it, so that memory grows
with the sequence and not with its square.

Each query row's answer, and its bound, depend on that row's scores alone: a block gives the same plain answer and
bound as the whole, and the same exact answer up to the oracle's own accuracy (deterministic.matmul splits a block's
seen keys, not all of them; no golden and no cache holds explain's answers). Two passes: the plain rounding, and the
bound, whose values are the oracle's exact answer (its steps are the oracle's, on the same numbers). Norm and RoPE
turn a group's q and k once (their cost and size are linear), inside the same bound as its blocks. `--rows` judges a
sample (chosen): the first and last rows, the edges of the query tiles kernels switch at, and random rows, seeded."""

import copy
import functools
import sys
import time

import numpy as np

from attention_conformance import bounds
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools.explain import forms, workers
from attention_conformance.tools.explain.problem import STAGES

BLOCK_SCORES = forms.BLOCK_SCORES
TILE = 64  # flash kernels' query tiles are 64 or 128 rows (flash-attn's kBlockM, torch's CPU q_split_size up to 256)
EDGES_TO = 1024  # --rows takes every tile's edges up to here, powers of two past it: a Llama-3-8B prefill in 20 s
LINEAR = ("q_rotated", "out")  # the stages as long as q: the only ones judged whole at sizes past problem.MAX_SCORES
AROUND = 4  # the query rows explain names known differences on when it streams: each is computed three times
PROGRESS_S = 5.0  # stderr says how far a computation is after this long, and every this long after
PARALLEL_FROM = 1 << 24  # scores past which K/V head groups go to a process per core (seconds of work; starting
# two processes from one holding 1 GiB took 0.02-0.06 s, measured)
CHOSEN = f"the first and last, the edges of the {TILE}-row tiles to {EDGES_TO} and of powers of two, the rest at random"


def block(p, rows, group=None):
    """The Problem `p` cut to query `rows` (a slice, or sorted indices) and, with `group` (a K/V head's number), to
    that K/V head and the query heads that share it: it computes, and gives, those alone (forms.Forms.rows)."""
    b = copy.copy(p)
    b.rows = None if isinstance(rows, slice) and rows == slice(0, p.T) else rows
    b.q_heads = heads = slice(None)
    if group is not None:
        shared = p.heads // p.kv_heads
        b.q_heads = heads = slice(group * shared, (group + 1) * shared)
        for shared_kv in ("k", "v"):  # shared again, on first use, from the group's own K/V head
            b.__dict__.pop(shared_kv, None)
        b.own_kv = tuple(t[..., group : group + 1, :, :] for t in p.own_kv)
        b.q, b.heads, b.kv_heads = p.q[..., heads, :, :], shared, 1
        b.mask, b.bias, b.bias_hides = (_heads(a, heads) for a in (p.mask, p.bias, p.bias_hides))
        b.sinks = None if p.sinks is None else p.sinks[heads]
    cut = (Ellipsis, rows, slice(None))
    cut = cut if group is None else (Ellipsis, heads) + cut[1:]
    b.arrays = dict(p.arrays) | {n: p.arrays[n][cut] for n in STAGES if n in p.arrays}
    b.shape = np.broadcast_to(False, p.shape)[cut].shape  # a view: no bytes
    b.hidden = b.keys_hidden()
    return b


def _heads(a, heads):
    return a if a is None or np.ndim(a) < 3 or np.shape(a)[-3] == 1 else a[..., heads, :, :]


def _grouped(p):
    """Whether p streams a K/V head at a time, with the query heads that share it: never shared in memory."""
    return p.headed and p.form == "q/k/v" and "k" not in vars(p) and not (p.norm and p.norm["over_heads"])


def _seen(b):
    """The keys some query of block `b` sees, as a slice (a causal block's last keys, a window's first, are hidden
    from all of its queries): `b` cut to them. A key hidden from every query of the block adds an exact 0 to each of its
    sums, and rounds nothing, in the oracle and in the bound: a causal prefill costs half of its square."""
    seen = np.flatnonzero(~b.hidden.reshape(-1, b.S).all(axis=0))
    cut = slice(int(seen[0]), int(seen[-1]) + 1) if seen.size else slice(0, 1)
    b.hidden = b.hidden[..., cut]
    if b.bias is not None and np.shape(b.bias)[-1] == b.S:
        b.bias = b.bias[..., cut]
    return cut


def around(p, index, err):
    """(the block holding the element at `index`, its (exact, plain, derived) whole, where it is in words): where
    explain tries the known differences on a problem it streamed (said on stderr: they take a while)."""
    # Each known difference splits k and v shared to every head for its exact products, three times: past 64 MiB
    # each (a 4096-key Llama layer's 128 MiB took 35 s for them all, measured), one K/V head and its query heads.
    big = _grouped(p) and p.heads * p.S * p.H > 4 * BLOCK_SCORES
    group = index[-3] // (p.heads // p.kv_heads) if big else None
    most = min(AROUND, rows_per_block(p, group))
    start = index[-2] // most * most
    b = block(p, slice(start, min(start + most, p.T)), group)
    heads = "" if group is None else f" of the query heads sharing K/V head {group}"
    where = f"query rows {start}..{start + b.shape[-2] - 1}{heads}, where the worst is"
    err(f"explain: trying the known differences on {where}")
    return b, (b.compute(), b.compute(rounding=tolerance_model.plain_dtype(p.dtype)), b.bound()), where


def rows_per_block(p, group=None):
    """Query rows a block of BLOCK_SCORES holds: over every head, or over the query heads one K/V head (`group`) has."""
    lead = int(np.prod(p.shape[:-2])) // (1 if group is None else p.kv_heads)
    return max(1, BLOCK_SCORES // (lead * p.S))


def chosen(T, count, seed):
    """`--rows count`: the first and last rows, the rows either side of each multiple of TILE up to EDGES_TO and of
    each power of two past it, the last tile's first row and the one before, and `count` more at random."""
    edges = list(range(TILE, min(T, EDGES_TO + 1), TILE)) + [1 << n for n in range(11, T.bit_length()) if 1 << n < T]
    fixed = {0, T - 1} | {r for m in edges + [(T - 1) // TILE * TILE] if m > 0 for r in (m - 1, m)}
    rest = np.setdiff1d(np.arange(T), sorted(fixed))
    drawn = np.random.default_rng(seed).choice(rest, size=min(count, rest.size), replace=False)
    return np.union1d(sorted(fixed), drawn).astype(np.int64)


def _chunks(rows, most):
    """`rows` (sorted indices) `most` at a time, each a slice where its rows are consecutive: a sample's scattered rows
    share blocks, so that k is split for the exact products once a block, not once a row."""
    for at in range(0, rows.size, most):
        chunk = rows[at : at + most]
        yield slice(int(chunk[0]), int(chunk[-1]) + 1) if chunk[-1] - chunk[0] + 1 == chunk.size else chunk


class Said:
    """The progress line on stderr: nothing for a computation done within PROGRESS_S."""

    def __init__(self, total, write, clock=time.monotonic):
        self.total, self.done, self.write, self.clock = total, 0, write, clock
        self.start = self.said = clock()

    def rows(self, n, what):
        self.done += n
        if self.done == self.total and not n:  # the workers' count, polled again after the end: said already
            return
        now = self.clock()
        if now - self.said >= PROGRESS_S or (self.done == self.total and now - self.start >= PROGRESS_S):
            done = 100 * self.done // self.total
            self.write(f"explain: {done}% of the float64 work done ({what} now), {now - self.start:.0f} s")
            self.said = now


def stream(p, rows, err=None):
    """(exact, plain, derived): {stage: [..., len(rows), H]} for the linear stages the file gives, at query `rows`
    (sorted file indices), computed a block at a time, and a K/V head's group at a time: its plain rounding, then its
    oracle and bound. Raises tolerance_model.Overflow as Problem.bound does."""
    names = [n for n in LINEAR if n in p.arrays]
    groups = range(p.kv_heads) if _grouped(p) else [None]
    shared = p.heads // p.kv_heads if p.headed else 1
    said = Said(2 * rows.size * len(groups), err or (lambda line: print(line, file=sys.stderr)))
    whole = copy.copy(p)
    whole.norm = whole.pairing = None  # turned once, below, for every block
    chunks = list(_chunks(rows, rows_per_block(p, groups[0])))

    def attention(group, q, k, v, rounding=None, what="the plain rounding", given=lambda t: t):
        """The linear stages of the rows for `group`'s query heads (q) and K/V head (k, v), shared by broadcasting:
        q and k turned (norm and RoPE are per head and per position), then a block of rows at a time. `given` makes
        k and v the bound's exact inputs."""
        q, k, rotated = p.before_scores(q, given(k), rounding, {})
        v, part = given(v), []
        for chunk in chunks:
            b = block(whole, chunk, group)
            keys = (Ellipsis, _seen(b), slice(None))
            part.append(b.compute(rounding, q=q, k=k[keys], v=v[keys], keep=("out",))["out"])
            if not workers.counted(b.shape[-2]):  # a worker's rows are said by the parent
                said.rows(b.shape[-2], what)
        found = {"out": np.concatenate(part, axis=-2)}
        if rotated is not None:
            rotated = rotated[..., rows, :]
            found["q_rotated"] = (
                np.asarray(rotated).astype(np_dtype(rounding)).astype(np.float64) if rounding else rotated
            )
        return {n: found[n] for n in names}

    exact, plain, derived = {}, {}, {}
    with np.errstate(all="ignore"):
        if p.form == "x and weights":  # one group: the projections are inside the bound
            _put(plain, attention(None, p.q, p.k, p.v, tolerance_model.plain_dtype(p.dtype)))

            def projected(x, w_query, w_key, w_value):
                q, k, v = p._project(dict(w_query=w_query, w_key=w_key, w_value=w_value), "repeat", x)
                found = attention(None, q, k, v, what="the oracle and its bound")
                _put(exact, {n: a.value for n, a in found.items()})  # the bound's steps are the oracle's
                return found

            _put(derived, tolerance_model.bound(p.dtype, projected, p.x, **p.weights_given))
            return exact, plain, derived
        q, (k, v) = p.q, p.own_kv if groups[0] is not None else (p.k, p.v)
        count = None if groups[0] is None else p.heads

        def answers(group):
            """The group's (plain, derived, exact) stages: `heads` of q with the K/V head `kv` (axis -3)."""
            heads, kv = _axes(group, shared)
            found = attention(group, q[heads], k[kv], v[kv], tolerance_model.plain_dtype(p.dtype))
            kept = {}
            bounded = functools.partial(_exact_kept, kept, attention, group, k=k[kv], v=v[kv])
            return found, tolerance_model.bound(p.dtype, bounded, q=q[heads]), kept

        if workers.usable(len(groups)) and rows.size * p.S * p.heads >= PARALLEL_FROM:
            found = workers.each(
                answers,
                list(groups),
                lambda done: said.rows(done - said.done, f"K/V head groups on {workers.cores()} cores"),
                PROGRESS_S / 5,
            )
        else:
            found = ((group, answers(group)) for group in groups)
        for group, stages in found:
            for store, one in zip((plain, derived, exact), stages):
                _put(store, one, _axes(group, shared)[0], count)
    return exact, plain, derived


def _axes(group, shared):
    """(the query heads, the K/V head) of a group, on axis -3: all of them where there are no groups."""
    if group is None:
        return (Ellipsis,), (Ellipsis,)
    whole = (slice(None), slice(None))
    return (Ellipsis, slice(group * shared, (group + 1) * shared), *whole), (Ellipsis, slice(group, group + 1), *whole)


def _exact_kept(exact, attention, group, q, k, v):
    """A group's stages bounded, k and v given exactly (an input's err has no bytes), their values kept in `exact`:
    the bound's steps are the oracle's on the same numbers, so its values are the exact answer."""
    found = attention(group, q, k, v, what="the oracle and its bound", given=bounds.Bounded)
    exact.update({n: a.value for n, a in found.items()})
    return found


def _put(store, found, heads=(Ellipsis,), count=None):
    """Each of `found`'s stages into `store`'s, at the query `heads` of a group of them (`count` heads in all)."""
    for name, a in found.items():
        if count is None:
            store[name] = a
            continue
        if name not in store:
            store[name] = np.empty(a.shape[:-3] + (count,) + a.shape[-2:])
        store[name][heads] = a
