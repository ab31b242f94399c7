"""`attention-conformance explain FILE.npz`: is the difference I see on my own tensors a bug, or rounding?

The file holds the inputs of one attention and the user's result; the verdict is the tolerance
model's (judge.py) in the result's dtype at the file's shape. Beyond it, the worst element is
located, the first diverging intermediate named, and the result compared with the conventions
frameworks are known to differ on. NumPy only: no framework needs to be installed.
"""

import stat
import zipfile
from pathlib import Path

import numpy as np

from attention_conformance import bounds, judge, safe_io
from attention_conformance.adapters import reference
from attention_conformance.contract import np_dtype

INPUTS = (
    "q",
    "k",
    "v",
    "x",
    "w_query",
    "w_key",
    "w_value",
    "mask",
    "causal",
    "scale",
    "num_heads",
    "num_kv_heads",
    "out",
    "scores",
    "weights",
    "dtype",
)
USAGE = (
    "keys: q, k, v ([..., T, H], [..., S, H]; heads as [..., N, T, H] and [..., K, S, H] with num_kv_heads = K) "
    "or x, w_query, w_key, w_value ([..., T, D], [D, columns]; with num_heads and num_kv_heads, out is per head, "
    "[..., N, T, H]); out; optional mask (bool, True = hidden), causal, scale, scores (q k^T, before scaling), "
    "weights, dtype (when out is stored wider than the dtype judged, e.g. 'bfloat16')"
)


MAX_SCORES = 1 << 25  # [..., T, S] elements: 256 MiB per float64 array, and explain holds ~10 of them


class BadInput(judge.BadInput):
    pass


def _refuse(path, message):
    raise BadInput(f"{path}: {message}")


def load(path):
    """{name: array} from FILE.npz, every name known, nothing unpickled."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            _refuse(path, "not a regular file")
        stored = np.load(path, allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):  # np.save's .npy: one array, no names
            _refuse(path, "holds one array (np.save's .npy), not named arrays: save them with np.savez(path, q=q, ...)")
        with stored:
            arrays = {name: stored[name] for name in stored.files}
    except BadInput:
        raise
    except FileNotFoundError:
        _refuse(path, "no such file")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        _refuse(path, f"not a readable .npz (np.savez writes one): {type(exc).__name__}: {exc}")
    unknown = sorted(set(arrays) - set(INPUTS))
    if unknown:
        _refuse(path, f"unknown key {unknown[0]!r}; {USAGE}")
    return arrays


def _scalar(path, arrays, name, kind, default):
    if name not in arrays:
        return default
    value = arrays[name]
    if value.ndim != 0 or value.dtype.kind not in kind:
        _refuse(
            path,
            f"{name!r} must be a single {dict(b='bool', i='integer', f='number', U='string')[kind[0]]}, "
            f"got {value.dtype} of shape {list(value.shape)}",
        )
    return value.item()


def _judged_dtype(path, arrays):
    out = arrays["out"]
    named = _scalar(path, arrays, "dtype", "U", None)
    if named is not None:
        if named not in judge.DTYPES:
            _refuse(path, f"dtype {named!r} is not one of {', '.join(judge.DTYPES)}")
        if out.dtype.kind == "V" and out.dtype.itemsize == 2 and named == "bfloat16":
            arrays["out"] = out.view(np_dtype("bfloat16"))
        elif out.dtype.kind != "f" and out.dtype.name != "bfloat16":
            _refuse(path, f"'out' is {out.dtype}, not floating point")
        stored = np.asarray(arrays["out"], dtype=np.float64)
        if not np.array_equal(stored.astype(np_dtype(named)).astype(np.float64), stored, equal_nan=True):
            _refuse(
                path,
                f"'out' holds values that are not {named} numbers: is dtype {named!r} the dtype it was computed in?",
            )
        return named
    if out.dtype.name not in judge.DTYPES:
        _refuse(
            path,
            f"'out' is {out.dtype}; the dtypes judged are {', '.join(judge.DTYPES)} (a bfloat16 result: "
            "save it as float32 and add dtype='bfloat16')",
        )
    return out.dtype.name


class Problem:
    """One attention as the file states it, in float64: q [..., N, T, H] (N = 1 without heads)."""

    def __init__(self, path, arrays):
        self.path, self.arrays = path, arrays
        if "out" not in arrays:
            _refuse(path, f"no 'out' (your result); {USAGE}")
        self.dtype = _judged_dtype(path, arrays)
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value", "out", "scores", "weights"):
            if name in arrays and (arrays[name].dtype.kind not in "fiu" and arrays[name].dtype.name != "bfloat16"):
                _refuse(path, f"{name!r} is {arrays[name].dtype}, not numbers")
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value"):
            if name in arrays and not np.isfinite(np.asarray(arrays[name], dtype=np.float64)).all():
                where = np.argwhere(~np.isfinite(np.asarray(arrays[name], dtype=np.float64)))[0]
                _refuse(path, f"{name!r} holds NaN or inf (at {[int(i) for i in where]}): explain judges finite inputs")
        self.causal = bool(_scalar(path, arrays, "causal", "b", False))
        self.scale = _scalar(path, arrays, "scale", "fi", None)
        if self.scale is not None and not (np.isfinite(self.scale) and self.scale != 0):
            _refuse(
                path, f"'scale' is {self.scale!r}; it must be a finite, non-zero number (leave it out for 1/sqrt(H))"
            )
        qkv, xw = (
            [n for n in ("q", "k", "v") if n in arrays],
            [n for n in ("x", "w_query", "w_key", "w_value") if n in arrays],
        )
        if qkv and xw or not (len(qkv) == 3 or len(xw) == 4):
            _refuse(
                path,
                f"give either q, k and v or x, w_query, w_key and w_value (got {', '.join(qkv + xw) or 'neither'})",
            )
        self.form = "q/k/v" if qkv else "x and weights"
        self.headed = False
        if qkv:
            self._from_qkv(path, arrays)
        else:
            self._from_x(path, arrays)

    def _f64(self, name):
        return np.asarray(self.arrays[name], dtype=np.float64)

    def _from_qkv(self, path, arrays):
        q, k, v = (self._f64(n) for n in ("q", "k", "v"))
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.ndim < 2 or 0 in t.shape:
                _refuse(path, f"{name!r} has shape {list(t.shape)}; it needs [..., tokens, head size], no empty axis")
        if k.shape[-2] != v.shape[-2] or q.shape[-1] != k.shape[-1]:
            _refuse(
                path,
                f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: q and k need the same head size, "
                "k and v the same number of keys",
            )
        kv_heads = _scalar(path, arrays, "num_kv_heads", "i", None)
        if kv_heads is not None:
            self.headed = True
            if q.ndim < 3 or k.ndim < 3 or k.shape[-3] != kv_heads or v.shape[-3] != kv_heads or q.shape[-3] % kv_heads:
                _refuse(
                    path,
                    f"num_kv_heads {kv_heads} needs q [..., N, T, H] with N a multiple of it and k, v "
                    f"[..., {kv_heads}, S, H]; got q {list(q.shape)}, k {list(k.shape)}",
                )
            self.heads, self.kv_heads, self.own_kv = q.shape[-3], kv_heads, (k, v)
            k, v = judge.share_kv_heads(k, q.shape[-3]), judge.share_kv_heads(v, q.shape[-3])
        self.q, self.k, self.v = q, k, v
        self.d_model = None
        self._check_shapes()

    def _from_x(self, path, arrays):
        x = self._f64("x")
        w = {n: self._f64(n) for n in ("w_query", "w_key", "w_value")}
        heads = _scalar(path, arrays, "num_heads", "i", 1)
        kv_heads = _scalar(path, arrays, "num_kv_heads", "i", heads)
        if x.ndim < 2 or any(t.ndim != 2 for t in w.values()) or any(t.shape[0] != x.shape[-1] for t in w.values()):
            _refuse(
                path,
                f"x [..., T, D] and weights [D, columns]; got x {list(x.shape)}, "
                + ", ".join(f"{n} {list(t.shape)}" for n, t in w.items()),
            )
        if heads < 1 or kv_heads < 1 or heads % kv_heads or w["w_query"].shape[1] % heads:
            _refuse(
                path,
                f"num_heads {heads} and num_kv_heads {kv_heads}: heads must divide w_query's "
                f"{w['w_query'].shape[1]} columns and be a multiple of num_kv_heads",
            )
        H = w["w_query"].shape[1] // heads
        if w["w_key"].shape[1] != kv_heads * H or w["w_value"].shape[1] != kv_heads * H:
            _refuse(path, f"w_key and w_value need num_kv_heads x head size = {kv_heads * H} columns")
        self.weights_given = w
        self.x, self.heads, self.kv_heads, self.headed = x, heads, kv_heads, heads > 1 or kv_heads != heads
        self.d_model = x.shape[-1]
        self.q, self.k, self.v = self._project(w, "repeat")
        self._check_shapes()

    def _project(self, w, grouping, x=None):
        """q, k, v per head (head n: columns n*H:(n+1)*H; K/V head n // (N/K), or n % K tiled)."""
        q, k, v = (reference.project(self.x if x is None else x, w[n]) for n in ("w_query", "w_key", "w_value"))
        if not self.headed:
            return q, k, v
        split = lambda t, n: np.stack(np.split(t, n, axis=-1), axis=-3)  # noqa: E731 - [..., T, n*H] -> [..., n, T, H]
        q, k, v = split(q, self.heads), split(k, self.kv_heads), split(v, self.kv_heads)
        if grouping == "repeat":
            return q, judge.share_kv_heads(k, self.heads), judge.share_kv_heads(v, self.heads)
        reps = self.heads // self.kv_heads
        return q, np.tile(k, (1,) * (k.ndim - 3) + (reps, 1, 1)), np.tile(v, (1,) * (v.ndim - 3) + (reps, 1, 1))

    def _check_shapes(self):
        path, T, S, H = self.path, self.q.shape[-2], self.k.shape[-2], self.v.shape[-1]
        try:
            lead = np.broadcast_shapes(self.q.shape[:-2], self.k.shape[:-2], self.v.shape[:-2])
        except ValueError:
            _refuse(
                path,
                f"q {list(self.q.shape)}, k {list(self.k.shape)}, v {list(self.v.shape)}: "
                "leading axes do not broadcast (fewer K/V heads than query heads? give num_kv_heads)",
            )
        self.T, self.S, self.H = T, S, self.q.shape[-1]
        self.shape = lead + (T, H)
        mask = self.arrays.get("mask")
        if mask is not None:
            if mask.dtype != bool:
                _refuse(path, f"'mask' is {mask.dtype}; it must be bool, True where a key is hidden")
            try:
                fits = np.broadcast_shapes(mask.shape, lead + (T, S)) == lead + (T, S)
            except ValueError:
                fits = False
            if not fits:
                _refuse(path, f"'mask' {list(mask.shape)} does not broadcast to [..., T, S] = {list(lead + (T, S))}")
        self.mask = mask
        elements = int(np.prod(lead + (T, S)))
        if elements > MAX_SCORES:
            _refuse(
                path,
                f"[..., T, S] = {list(lead + (T, S))} is {elements} scores; explain computes in float64 and "
                f"handles up to {MAX_SCORES} (a few heads or a slice of the batch show the same)",
            )
        self.hidden = judge.hidden_keys(T, S, mask, self.causal)
        for name, want in (("out", lead + (T, H)), ("scores", lead + (T, S)), ("weights", lead + (T, S))):
            if name in self.arrays and tuple(self.arrays[name].shape) != tuple(want):
                _refuse(path, f"{name!r} has shape {list(self.arrays[name].shape)}; these inputs give {list(want)}")

    def compute(self, rounding=None, hidden=None, scale="given", q=None, k=None, v=None, over_queries=False):
        return judge.attend(
            self.q if q is None else q,
            self.k if k is None else k,
            self.v if v is None else v,
            self.hidden if hidden is None else hidden,
            self.scale if scale == "given" else scale,
            rounding,
            over_queries,
        )

    def bound(self, **arguments):
        """The derived bound on each output of compute(**arguments) in the dtype judged: from x and the
        weights when the file gives them (the projections round too), else from q, k and v."""
        if self.form == "x and weights" and not set("qkv") & set(arguments):

            def projected(x, w_query, w_key, w_value):
                q, k, v = self._project(dict(w_query=w_query, w_key=w_key, w_value=w_value), "repeat", x)
                return self.compute(q=q, k=k, v=v, **arguments)

            return judge.bound(self.dtype, projected, self.x, **self.weights_given)
        return judge.bound(self.dtype, self.compute, **(dict(q=self.q, k=self.k, v=self.v) | arguments))

    def describe(self):
        heads = f", {self.q.shape[-3]} heads" if self.headed else ""
        if self.headed and self.form == "x and weights" and self.kv_heads != self.heads:
            heads += f" over {self.kv_heads} K/V heads"
        elif self.headed and "num_kv_heads" in self.arrays:
            heads += f" over {int(self.arrays['num_kv_heads'])} K/V heads"
        scale = "1/sqrt(H)" if self.scale is None else repr(self.scale)
        masking = (", mask" if self.mask is not None else "") + (", causal (bottom-right)" if self.causal else "")
        return (
            f"out {list(self.shape)} {self.dtype}, from {self.form}: T {self.T}, S {self.S}, H {self.H}{heads}"
            f"{masking}, scale {scale}"
        )


def _conventions(p):
    """(name, what it means, p.compute's arguments) for each difference frameworks and ports are known
    to make: computed like the oracle, so each is judged by the same model."""
    found = []
    if p.causal and p.T != p.S:
        top_left = np.arange(p.S)[None, :] > np.arange(p.T)[:, None]
        found.append(
            (
                "top-left causal alignment",
                "query i sees keys 0..i; the suite aligns bottom-right (query i sees "
                "keys 0..i + S - T, so the last query sees every key), as decoding with a KV cache needs",
                dict(hidden=top_left if p.mask is None else top_left | p.mask),
            )
        )
    if p.mask is not None:
        found.append(
            (
                "inverted mask polarity",
                "your mask is read as True = attend (Keras, JAX and torch's SDPA bool "
                "masks); this file says True = hidden (nn.MultiheadAttention's attn_mask and key_padding_mask)",
                dict(hidden=judge.hidden_keys(p.T, p.S, ~p.mask, p.causal)),
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
            found.append(_TILED + (dict(k=tiled[0], v=tiled[1]),))
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
        found.append(_TILED + (dict(zip("qkv", p._project(w, "tile"))),))
    return found


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


def explain(path, out=print, err=print):
    """Print the verdict on FILE.npz; return the exit code (0 within, 1 beyond)."""
    p = Problem(path, load(path))
    k = judge.model()[p.dtype]
    out(f"explain {path}: {p.describe()}")  # before the float64 computation: a large file takes a while
    with np.errstate(all="ignore"):  # an overflow is said below, in one line, not as NumPy's warnings
        exact, plain = p.compute(), p.compute(rounding=judge.plain_dtype(p.dtype))
        try:
            derived = p.bound()
        except judge.Overflow as exc:
            _refuse(
                path,
                f"in {p.dtype}, {exc} when each step (q k^T, then its scale, the weights, the blend) is stored in "
                f"{p.dtype}: the model cannot judge that. A kernel that scales q first or keeps the scores in "
                "float32 may be right: compare its float32 result instead",
            )
    out(
        f"model: |error| <= {k:g} x max|plain - exact| + the bound derived for any correct {p.dtype} computation "
        f"(plain = every step rounded to {judge.plain_dtype(p.dtype)}"
        f"{', scaled to float64' if p.dtype == 'float64' else ''}; an exact zero no rounding reaches stays zero)"
    )
    verdicts = [
        judge.judge(name, p.dtype, p.arrays[name], exact[name], plain[name], derived[name], k)
        for name in ("scores", "weights", "out")
        if name in p.arrays
    ]
    for v in verdicts:
        out(f"  {v.name}: {'within' if v.within else 'BEYOND'} (margin {v.margin:.3g}); worst {v.describe()}")
    final = verdicts[-1]
    diverged = next((v for v in verdicts if not v.within), None)
    if diverged is None:
        out(
            f"verdict: within the expected error of {p.dtype} attention at this shape "
            f"(margin {final.margin:.3g} of the model's allowance): rounding, not a bug"
        )
        return 0
    if diverged.name != "out":
        out(f"first intermediate that diverges: {diverged.name}")
    if diverged.name == "scores":
        factor = 1.0 / np.sqrt(p.H) if p.scale is None else p.scale
        scaled = judge.judge(
            "scores",
            p.dtype,
            p.arrays["scores"],
            exact["scores"] * factor,
            plain["scores"] * factor,
            derived["scores"] * abs(factor)
            + bounds.unit_roundoff(np_dtype(p.dtype)) * np.abs(exact["scores"] * factor),
            k,
        )
        if scaled.within:
            out(f"  your scores are q k^T already scaled (x {factor:.6g}); explain's scores are q k^T before scaling")
    if final.within:
        hidden_key = diverged.limit == 0 and diverged.expected == 0 and diverged.name == "weights"
        err(
            f"verdict: out is within (margin {final.margin:.3g}), but {diverged.name} is beyond: "
            + (
                "your weights give a hidden key nonzero probability (a finite or clipped fill instead of -inf "
                "before the softmax)"
                if hidden_key
                else "the intermediate you gave is not the one this attention computes"
            )
        )
        return 1
    got = np.asarray(p.arrays["out"], dtype=np.float64)
    limit = judge.allowed(p.dtype, exact["out"], plain["out"], derived["out"], k)
    named = []
    rows = _masked_rows(p, got)
    if rows is not None:
        convention, empty = rows
        elsewhere = ~np.broadcast_to(empty[..., None], got.shape)
        if (np.abs(got - exact["out"]) <= limit)[elsewhere].all():
            named.append(f"{convention}; every other row is within")
    if not named:
        for name, meaning, arguments in _conventions(p):
            with np.errstate(all="ignore"):
                other = p.compute(**arguments)["out"]
                other_plain = p.compute(rounding=judge.plain_dtype(p.dtype), **arguments)["out"]
                other_bound = p.bound(**arguments)["out"]
                if judge.judge("out", p.dtype, got, other, other_plain, other_bound, k).within:
                    named.append(f"{name}: {meaning}")
    for convention in named:
        out(f"matches a known difference: {convention}")
    if (
        not named
        and p.dtype in ("float32", "float16")
        and "dtype" not in p.arrays
        and np.array_equal(got.astype(np_dtype("bfloat16")).astype(np.float64), got, equal_nan=True)
    ):
        out("every value of out is a bfloat16 number: if it was computed in bfloat16, save it with dtype='bfloat16'")
    err(
        f"verdict: beyond the expected error of {p.dtype} attention at this shape (margin {final.margin:.3g}): "
        + ("a known difference, not rounding" if named else "not rounding")
    )
    return 1


def main(path):
    import sys

    try:
        return explain(path, out=print, err=lambda line: print(line, file=sys.stderr))
    except judge.BadInput as exc:
        print(f"error: {safe_io.one_line(str(exc))}", file=sys.stderr)
        return 2
