"""`attention-conformance explain FILE.npz`: is the difference I see on my own tensors a bug, or rounding?

The file holds the inputs of one attention and the user's result; the verdict is the tolerance
model's (tolerance_model.py) in the result's dtype at the file's shape. Beyond it, the worst element is
located, the first diverging intermediate named, and the result compared with the conventions
frameworks are known to differ on. NumPy only: no framework needs to be installed.
"""

import dataclasses

import numpy as np

from attention_conformance import safe_io, writing
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools.explain import blocks, conventions, per_row, problem, stages
from attention_conformance.tools.explain.record import worst, write_files


def _conventions(p):
    """(name, what it means, p.compute's arguments) for each difference frameworks and ports are known
    to make: computed like the oracle, so each is judged by the same model."""
    found = []
    if p.causal:  # the commonest port bug there is: the flag dropped on the way to the kernel
        found.append(
            (
                "no causal mask",
                "every query saw every key, the later ones too: the causal flag or mask was not applied",
                dict(hidden=p.keys_hidden(causal=False, window=None)),
            )
        )
    found += conventions.offsets(p)
    if p.mask is not None:
        found.append(
            (
                "inverted mask polarity",
                "your mask is read as True = attend (Keras, JAX and torch's SDPA bool "
                "masks); this file says True = hidden (nn.MultiheadAttention's attn_mask and key_padding_mask)",
                dict(hidden=p.keys_hidden(mask=~p.mask)),
            )
        )
    given = p.scale if p.scale is not None else 1.0 / np.sqrt(p.H)
    for name, value in (
        ("1/H", 1.0 / p.H),
        ("1 (no scaling)", 1.0),
        ("1/sqrt(d_in)", None if p.d_model is None else 1.0 / np.sqrt(p.d_model)),
        ("1/sqrt(N x H)", 1.0 / np.sqrt(p.q.shape[-3] * p.H) if p.headed else None),
    ):
        if (
            value is not None
            and not np.isclose(value, given, rtol=1e-12)
            and all(not np.isclose(value, other["scale"], rtol=1e-12) for *_, other in found if "scale" in other)
        ):
            found.append(
                (
                    f"scores scaled by {name}",
                    "instead of "
                    + ("1/sqrt(H), H the head size" if p.scale is None else f"the given scale {p.scale!r}"),
                    dict(scale=value),
                )
            )
    found += conventions.past_the_documents(p) + conventions.before_the_scores(p)
    if p.rows is None:  # a block (blocks.py) holds some of the queries: not the axis this mistake sums over
        found.append(
            (
                "softmax over the wrong axis",
                "normalised over queries (axis -2), not keys (axis -1)",
                dict(over_queries=True),
            )
        )
    if p.form == "q/k/v":
        if p.k.shape == p.v.shape:
            found.append(("k and v swapped", "keys used as values and values as keys", dict(k=p.v, v=p.k)))
        if p.headed and "num_kv_heads" in p.arrays and 1 < p.kv_heads < p.heads:
            tiled = [np.tile(t, (1,) * (t.ndim - 3) + (p.heads // p.kv_heads, 1, 1)) for t in p.own_kv]
            found.append(_TILED + (dict(k=tiled[0], v=tiled[1]) | _tiled_norm(p),))
        if p.packed and p.kv_heads == p.heads:
            # a norm comes before the split, on the projection as it is: normed here, then split the wrong way
            q, k = (p.q, p.k) if p.norm is None else p._normed(p.q, p.k, p.norm)
            found.append(
                (
                    "heads split without the transpose",
                    "the packed [..., T, N x H] inputs reshaped straight to [..., N, T, H] (view(B, N, T, H)), not "
                    "to [..., T, N, H] and transposed: each head saw a mix of positions",
                    {name: _split_straight(t) for name, t in (("q", q), ("k", k), ("v", p.v))} | dict(norm=None),
                )
            )
        return found
    w = p.weights_given
    for a, b in (("w_key", "w_value"), ("w_query", "w_key")):
        if w[a].shape == w[b].shape:
            found.append(
                (
                    f"{a} and {b} swapped",
                    "the two weights exchanged",
                    dict(zip("qkv", p._project(w | {a: w[b], b: w[a]}, "repeat"))),
                )
            )
    if all(t.shape[0] == t.shape[1] for t in w.values()):  # a port from nn.Linear turns all three, not one
        found.append(
            (
                "every weight transposed",
                "w_query, w_key and w_value used as [out, in] (torch's nn.Linear layout) where x @ W needs [in, out]",
                dict(zip("qkv", p._project({n: t.T for n, t in w.items()}, "repeat"))),
            )
        )
    for name, t in w.items():
        if t.shape[0] == t.shape[1]:
            found.append(
                (
                    f"{name} transposed",
                    "the weight used as [out, in] (torch's nn.Linear layout) where x @ W needs [in, out]",
                    dict(zip("qkv", p._project(w | {name: t.T}, "repeat"))),
                )
            )
    if p.headed and 1 < p.kv_heads < p.heads:
        found.append(_TILED + (dict(zip("qkv", p._project(w, "tile"))) | _tiled_norm(p),))
    return found


def _tiled_norm(p):
    """The norm's K/V weights tiled with their heads (qk.QK._normed)."""
    return {} if p.norm is None else dict(norm=p.norm | dict(grouping="tile"))


def _split_straight(t):
    """Per-head [..., N, T, H] as a straight reshape of the packed [..., T, N x H] makes it: the heads-order bug."""
    n, T, H = t.shape[-3:]
    packed = np.reshape(np.swapaxes(t, -3, -2), t.shape[:-3] + (T, n * H))
    return np.reshape(packed, t.shape[:-3] + (n, T, H))


_TILED = (
    "K/V heads tiled, not repeated",
    "query head n used K/V head n % K (tile) instead of n // (N/K) "
    "(repeat_interleave, as torch's enable_gqa and Llama's repeat_kv)",
)


def _masked_rows(p, out):
    """(convention, rows mask) when the result differs from the suite only on rows whose every key is
    hidden (the suite: zero weights and zero context), naming what the result holds there."""
    empty = np.broadcast_to(p.hidden, p.shape[:-1] + (p.S,)).all(axis=-1)  # [..., T]
    if not empty.any():
        return None
    rows = out[empty]
    if np.isnan(rows).all():
        return (
            "NaN on fully masked rows (an -inf fill before softmax gives 0/0; "
            "the suite gives zero weights and context)",
            empty,
        )
    uniform = np.broadcast_to(p.v.mean(axis=-2, keepdims=True), p.shape)[empty]
    if np.allclose(rows, uniform, rtol=1e-2, atol=1e-3):
        return (
            "uniform weights on fully masked rows (a finite fill such as -1e9 or the dtype's minimum averages "
            "every value; the suite gives zero weights and context)"
        ), empty
    return None


def _known(p, name, got, exact, k, err):
    """'convention: meaning' for each known difference whose `name` output `got` is within, judged as the stated one."""
    named, known = [], list(_conventions(p))
    said = blocks.Said(len(known), err)  # each one a whole oracle and bound: a long decode's took 90 s, said nothing
    for convention, meaning, arguments in known:
        said.rows(1, "the known differences")
        with np.errstate(all="ignore"):
            other = p.compute(**arguments)[name]
            if np.array_equal(other, exact[name], equal_nan=True):  # the same as stated: it explains nothing
                continue
            other_plain = p.compute(rounding=tolerance_model.plain_dtype(p.dtype), **arguments)[name]
            other_bound = p.bound(**arguments)[name]
            if tolerance_model.judge(name, p.dtype, got, other, other_plain, other_bound, k).within:
                named.append(f"{convention}: {meaning}")
    return named


def explain(path, out=print, err=print, record=None, allowances=False, rows=None, seed=0):
    """Print the verdict on FILE.npz; return the exit code (0 within, 1 beyond). `record`, a dict, is filled with
    what a program reads (`explain --json`): each stage's worst element, its error and its allowance, and with
    `allowances` the elementwise allowances too (`explain --allowance`; arrays as large as the result, kept only
    when asked for). `rows` judges a sample of the query rows (blocks.chosen, drawn with `seed`)."""
    record = {} if record is None else record
    code = _explain(path, out, err, record, allowances, rows, seed)
    record["verdict"] = {0: "within", per_row.NO_ANSWER: "no answer"}.get(code, "beyond")
    return code


def _oracle(p, rows, seed, err):
    """(exact, plain, derived, the query rows judged or None for all): whole, or a block of rows at a time."""
    if not p.streams and rows is None:
        return p.compute(), p.compute(rounding=tolerance_model.plain_dtype(p.dtype)), p.bound(), None
    if any(name in p.arrays for name in problem.STAGES[1:-1]):
        problem.refuse(p.path, "--rows judges out and q_rotated: leave the [..., T, S] stages out, or --rows")
    judged = np.arange(p.T) if rows is None else blocks.chosen(p.T, rows, seed)
    return *blocks.stream(p, judged, err), judged


def _explain(path, out, err, record, allowances, rows, seed):
    p = problem.Problem(path, problem.load(path))
    record |= {"file": str(path), "dtype": p.dtype, "problem": p.describe(), "stages": [], "known_differences": []}
    k = tolerance_model.model()[p.dtype]
    out(f"explain {path}: {p.describe()}")  # before the float64 computation: a large file takes a while
    with np.errstate(all="ignore"):  # an overflow is said below, in one line, not as NumPy's warnings
        try:
            exact, plain, derived, judged = _oracle(p, rows, seed, err)
        except tolerance_model.Overflow as exc:
            problem.refuse(
                path,
                f"in {p.dtype}, {exc} when each step (q k^T, then its scale, the weights, the blend) is stored in "
                f"{p.dtype}: the model cannot judge that. A kernel that scales q first or keeps the scores in "
                "float32 may be right: compare its float32 result instead",
            )
    out(
        f"model: |error| <= {k:g} x max|plain - exact| + the bound derived for any correct {p.dtype} computation "
        f"(plain = every step rounded to {tolerance_model.plain_dtype(p.dtype)}"
        f"{', scaled to float64' if p.dtype == 'float64' else ''}; an exact zero no rounding reaches stays zero)"
    )
    given = {name: p.arrays[name] for name in problem.STAGES if name in p.arrays}
    if judged is not None and judged.size < p.T:  # every row: the file's own arrays, not a copy
        given = {name: t[..., judged, :] for name, t in given.items()}
    verdicts = [tolerance_model.judge(n, p.dtype, t, exact[n], plain[n], derived[n], k) for n, t in given.items()]
    if judged is not None:  # the worst element's place in the file, and the diagnostics on the block holding it
        verdicts = [dataclasses.replace(v, index=v.index[:-2] + (judged[v.index[-2]], v.index[-1])) for v in verdicts]
        if rows is not None:
            record["rows_judged"], record["rows"] = int(judged.size), judged.tolist()
            out(f"judged {judged.size} of {p.T} query rows (--rows {rows}, seed {seed}): {blocks.CHOSEN}")
    for v in verdicts:
        out(f"  {v.name}: {'within' if v.within else 'BEYOND'} (margin {v.margin:.3g}); worst {v.describe()}")
        record["stages"].append(worst(v))
        if allowances:
            with np.errstate(all="ignore"):  # -inf scores where a key is hidden: inf - inf, not judged there
                allowed = tolerance_model.allowed(p.dtype, exact[v.name], plain[v.name], derived[v.name], k)
            record.setdefault("allowed", {})[v.name] = allowed
            record.setdefault("expected", {})[v.name] = np.asarray(exact[v.name], dtype=np.float64)
    final = verdicts[-1]
    sampled = "" if rows is None else f", on the {judged.size} of {p.T} query rows judged"
    diverged = next((v for v in verdicts if not v.within), None)
    out_last, rows_judged = final.name == "out", np.arange(p.T) if judged is None else judged
    if out_last and not final.within:  # before `around` below takes p, exact, plain and derived to one block
        beyond = per_row.beyond(p.dtype, given["out"], exact["out"], plain["out"], derived["out"], k)
        record["rows_beyond"] = rows_judged[beyond].tolist()
        out(per_row.said_beyond(beyond, rows_judged))
    if diverged is None:
        unseen = per_row.without_answer(p.dtype, exact["out"], plain["out"], derived["out"], k) if out_last else None
        if unseen is not None and unseen.any():
            record["rows_without_answer"] = rows_judged[unseen].tolist()
            out(per_row.no_answer(p.dtype, unseen, rows_judged, final.margin, p.S))
            return per_row.NO_ANSWER
        out(
            f"verdict: within the expected error of {p.dtype} attention at this shape{sampled} "
            f"(margin {final.margin:.3g} of the model's allowance): rounding, not a bug"
        )
        return 0
    if diverged is not final:
        out(f"first intermediate that diverges: {diverged.name}")
    where = None
    if judged is not None:
        p, (exact, plain, derived), where = blocks.around(p, diverged.index, err)
    if final.within:
        named = stages.mixed_up(p, diverged, exact, plain, derived, k)
        if not named and diverged.name == "q_rotated":  # RoPE's positions, which the output may not show
            named = _known(p, diverged.name, np.asarray(p.arrays[diverged.name], dtype=np.float64), exact, k, err)
        _tried(where, named, out)
        for convention in named:
            out(f"matches a known difference: {convention}")
        record["known_differences"] = named
        hidden_key = diverged.limit == 0 and diverged.expected == 0 and diverged.name == "weights"
        err(
            f"verdict: {final.name} is within{sampled} (margin {final.margin:.3g}), but {diverged.name} is beyond: "
            + (
                "your weights give a hidden key nonzero probability (a finite or clipped fill instead of -inf "
                "before the softmax)"
                if hidden_key
                else "a known difference, not rounding"
                if named
                else "the intermediate you gave is not the one this attention computes"
            )
        )
        return 1
    name = final.name
    got = np.asarray(p.arrays[name], dtype=np.float64)
    limit = tolerance_model.allowed(p.dtype, exact[name], plain[name], derived[name], k)
    named = stages.mixed_up(p, final, exact, plain, derived, k)
    rows = _masked_rows(p, got) if name == "out" else None
    if rows is not None:
        convention, empty = rows
        elsewhere = ~np.broadcast_to(empty[..., None], got.shape)
        if (np.abs(got - exact["out"]) <= limit)[elsewhere].all():
            named.append(f"{convention}; every other row is within")
    if not named:
        named = _known(p, name, got, exact, k, err)
    _tried(where, named, out)
    for convention in named:
        out(f"matches a known difference: {convention}")
    record["known_differences"] = named
    if (
        not named
        and p.dtype in ("float32", "float16")
        and "dtype" not in p.arrays
        and np.any(got)  # zeros are every dtype's numbers
        and np.array_equal(got.astype(np_dtype("bfloat16")).astype(np.float64), got, equal_nan=True)
    ):
        out(
            f"every value of {name} is a bfloat16 number: if it was computed in bfloat16, save it with dtype='bfloat16'"
        )
    if not named and p.pairing and p.scaling is not None and p.scaling["rope_type"] == "dynamic":  # an outside trial's
        out(
            f"dynamic NTK's base is taken here at the last position + 1 ({p.scaling['length']}): a rotary module that "
            "ran a longer sequence before keeps that one's larger base (transformers' dynamic_rope_update), and keys "
            "cached at other lengths were turned with other bases"
        )
    if not named and p.form == "q/k/v" and not p.headed and np.ndim(p.arrays["q"]) == 3:  # the trial's first guess
        out("if q, k and v hold several heads packed as [..., T, N x H], give num_heads (explain --help)")
    err(
        f"verdict: beyond the expected error of {p.dtype} attention at this shape{sampled} "
        f"(margin {final.margin:.3g}): " + ("a known difference, not rounding" if named else "not rounding")
    )
    return 1


def _tried(where, named, out):
    """Where a streamed problem's known differences were tried, and how many match (none is an answer too)."""
    if where is not None:
        out(f"known differences tried on {where}: " + (f"{len(named)} match" if named else "none matches"))


def options(parser):
    """explain's arguments (cli.py's parser)."""
    parser.add_argument("file", metavar="FILE.npz")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the verdict for a program: each stage's worst element, its error, the allowance there",
    )
    parser.add_argument(
        "--allowance",
        metavar="PATH.npz",
        help="also write the allowance itself: allowed_<stage> (the |error| the model allows, elementwise) and "
        "expected_<stage> (the float64 answer); with --rows, at the rows judged",
    )
    parser.add_argument(
        "--rows",
        type=_count,
        metavar="N",
        help=f"judge a sample of the query rows: the first and last, either side of each multiple of {blocks.TILE} "
        f"to {blocks.EDGES_TO} and each power of two past it (where flash kernels' query tiles end), the last tile's "
        "start, and N more at random; the verdict says how many",
    )
    parser.add_argument("--seed", type=_count, default=0, help="the seed --rows draws with (default 0)")


def _count(text):
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def main(path, json_path=None, allowance_path=None, rows=None, seed=0):
    import sys

    record = {}
    try:
        say = lambda line: print(line, file=sys.stderr)  # noqa: E731
        code = explain(path, print, say, record, allowances=allowance_path is not None, rows=rows, seed=seed)
    except tolerance_model.BadInput as exc:
        print(f"error: {safe_io.one_line(str(exc))}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # past what forms.fits estimated: the machine's limit, never read as "beyond"
        said = f"ran out of memory ({exc}): save fewer heads (with their K/V heads) or a slice of the batch"
        print(f"error: {path}: {safe_io.one_line(said)}", file=sys.stderr)
        return 2
    try:
        write_files(record, json_path, allowance_path)
    except writing.Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return writing.EXIT
    return code
