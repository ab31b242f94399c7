"""One attention as a user's FILE.npz states it, for `attention-conformance explain` (tools/explain.py):
the file read within limits and checked (every refusal one line naming the file and what to fix), and the
attention it holds computed in float64 by the oracle, plainly rounded, or bounded, as the model needs."""

import stat
import zipfile
from pathlib import Path

import numpy as np

from attention_conformance import dtypes
from attention_conformance.adapters import reference
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model

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
    "window",
    "softcap",
    "sinks",
    "pairing",
    "rotary_dim",
    "theta",
    "position",
    "bias",
)
# The keys FILE.npz may hold and what each means: `explain --help` prints one a line, a refusal names them.
KEYS = (
    ("q, k, v", "[..., T, H], [..., S, H]; heads as [..., N, T, H] and [..., K, S, H] with num_kv_heads = K"),
    ("x, w_query, w_key, w_value", "instead of q, k, v: [..., T, D], [D, columns]; with num_heads and num_kv_heads, "
     "out is per head, [..., N, T, H]"),
    ("num_heads, num_kv_heads", "head counts: with x and the weights, N and K; with q, k, v, K for grouped heads"),
    ("out", "your result (required)"),
    ("mask", "bool, True = hidden"),
    ("causal", "True: each query sees the keys up to its own position (bottom-right when S > T)"),
    ("scale", "the scores' scale (default 1/sqrt(H))"),
    ("scores", "q k^T, before scaling: judged too"),
    ("weights", "the softmax's output: judged too"),
    ("dtype", "the dtype judged, when out is stored wider, e.g. 'bfloat16'"),
    ("window", "a causal band of that many keys"),
    ("softcap", "cap tanh(s / cap) before the mask; 0 is none"),
    ("sinks", "a logit per head joining each softmax"),
    ("pairing", "'interleaved' or 'rotate_half': q and k before RoPE, keys at positions 0..S-1"),
    ("rotary_dim, theta, position", "RoPE's rotated dims (default H), base (10000) and the first query's position "
     "(default S - T)"),
    ("bias", "float, broadcastable to [..., T, S], added to the scaled scores: ONNX's and torch's float attn_mask, "
     "ALiBi's and T5's biases; -inf hides a key"),
)
USAGE = "keys: " + "; ".join(names for names, _ in KEYS) + " (attention-conformance explain --help says what each is)"
HELP = "\n".join(f"  {names:29} {meaning}" for names, meaning in KEYS)


MAX_SCORES = 1 << 25  # [..., T, S] elements: 256 MiB per float64 array, and explain holds ~10 of them


class BadInput(tolerance_model.BadInput):
    pass


def refuse(path, message):
    raise BadInput(f"{path}: {message}")


def load(path):
    """{name: array} from FILE.npz, every name known, nothing unpickled."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            refuse(path, "not a regular file")
        stored = np.load(path, allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):  # np.save's .npy: one array, no names
            refuse(path, "holds one array (np.save's .npy), not named arrays: save them with np.savez(path, q=q, ...)")
        with stored:
            arrays = {name: stored[name] for name in stored.files}
    except BadInput:
        raise
    except FileNotFoundError:
        refuse(path, "no such file")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        refuse(path, f"not a readable .npz (np.savez writes one): {type(exc).__name__}: {exc}")
    unknown = sorted(set(arrays) - set(INPUTS))
    if unknown:
        refuse(path, f"unknown key {unknown[0]!r}; {USAGE}")
    return arrays


def _scalar(path, arrays, name, kind, default):
    if name not in arrays:
        return default
    value = arrays[name]
    if value.ndim != 0 or value.dtype.kind not in kind:
        refuse(
            path,
            f"{name!r} must be a single {dict(b='bool', i='integer', f='number', U='string')[kind[0]]}, "
            f"got {value.dtype} of shape {list(value.shape)}",
        )
    return value.item()


def _judged_dtype(path, arrays):
    out = arrays["out"]
    named = _scalar(path, arrays, "dtype", "U", None)
    if named is not None:
        if named not in dtypes.DTYPES:
            refuse(path, f"dtype {named!r} is not one of {', '.join(dtypes.DTYPES)}")
        if out.dtype.kind == "V" and out.dtype.itemsize == 2 and named == "bfloat16":
            arrays["out"] = out.view(np_dtype("bfloat16"))
        elif out.dtype.kind != "f" and out.dtype.name != "bfloat16":
            refuse(path, f"'out' is {out.dtype}, not floating point")
        stored = np.asarray(arrays["out"], dtype=np.float64)
        if not np.array_equal(stored.astype(np_dtype(named)).astype(np.float64), stored, equal_nan=True):
            refuse(
                path,
                f"'out' holds values that are not {named} numbers: is dtype {named!r} the dtype it was computed in?",
            )
        return named
    if out.dtype.name not in dtypes.DTYPES:
        refuse(
            path,
            f"'out' is {out.dtype}; the dtypes judged are {', '.join(dtypes.DTYPES)} (a bfloat16 result: "
            "save it as float32 and add dtype='bfloat16')",
        )
    return out.dtype.name


class Problem:
    """One attention as the file states it, in float64: q [..., N, T, H] (N = 1 without heads)."""

    def __init__(self, path, arrays):
        self.path, self.arrays = path, arrays
        if "out" not in arrays:
            refuse(path, f"no 'out' (your result); {USAGE}")
        self.dtype = _judged_dtype(path, arrays)
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value", "out", "scores", "weights"):
            if name in arrays and (arrays[name].dtype.kind not in "fiu" and arrays[name].dtype.name != "bfloat16"):
                refuse(path, f"{name!r} is {arrays[name].dtype}, not numbers")
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value"):
            if name in arrays and not np.isfinite(np.asarray(arrays[name], dtype=np.float64)).all():
                where = np.argwhere(~np.isfinite(np.asarray(arrays[name], dtype=np.float64)))[0]
                refuse(path, f"{name!r} holds NaN or inf (at {[int(i) for i in where]}): explain judges finite inputs")
        self.causal = bool(_scalar(path, arrays, "causal", "b", False))
        self.scale = _scalar(path, arrays, "scale", "fi", None)
        if self.scale is not None and not (np.isfinite(self.scale) and self.scale != 0):
            refuse(
                path, f"'scale' is {self.scale!r}; it must be a finite, non-zero number (leave it out for 1/sqrt(H))"
            )
        qkv, xw = (
            [n for n in ("q", "k", "v") if n in arrays],
            [n for n in ("x", "w_query", "w_key", "w_value") if n in arrays],
        )
        if qkv and xw or not (len(qkv) == 3 or len(xw) == 4):
            refuse(
                path,
                f"give either q, k and v or x, w_query, w_key and w_value (got {', '.join(qkv + xw) or 'neither'})",
            )
        self.form = "q/k/v" if qkv else "x and weights"
        self.headed = False
        self.window = _scalar(path, arrays, "window", "i", None)
        self.cap = _scalar(path, arrays, "softcap", "fi", None)
        if self.window is not None and self.window < 1 or self.cap is not None and not 0 <= self.cap < np.inf:
            refuse(path, f"window {self.window!r}, softcap {self.cap!r}: a window is >= 1 key, a cap >= 0 (0: none)")
        if qkv:
            self._from_qkv(path, arrays)
        else:
            self._from_x(path, arrays)
        self._rope(path, arrays)
        self.sinks = None
        if "sinks" in arrays:
            self.sinks = self._f64("sinks")
            heads = self.q.shape[-3] if self.headed else 1
            if self.sinks.shape not in ((), (heads,)) or not np.isfinite(self.sinks).all():
                refuse(path, f"'sinks' {list(self.sinks.shape)}: one finite logit, or one per head ({heads})")
            if self.headed and self.sinks.ndim == 0:
                self.sinks = np.full(heads, float(self.sinks))

    def _rope(self, path, arrays):
        """RoPE on q and k, where the file gives them before it: the pairing, rotary_dim, theta, the queries'
        first position (keys at 0..S-1)."""
        self.pairing = _scalar(path, arrays, "pairing", "U", None)
        if self.pairing is None:
            return
        self.rotary_dim = _scalar(path, arrays, "rotary_dim", "i", self.q.shape[-1])
        self.theta = float(_scalar(path, arrays, "theta", "fi", 10000.0))
        self.position = _scalar(path, arrays, "position", "i", self.S - self.T)
        if (
            self.pairing not in ("interleaved", "rotate_half")
            or not 2 <= self.rotary_dim <= self.q.shape[-1]
            or self.rotary_dim % 2
            or not 1 < self.theta < np.inf
            or not 0 <= self.position <= 500_000
        ):
            refuse(
                path,
                f"pairing {self.pairing!r}, rotary_dim {self.rotary_dim}, theta {self.theta}, position "
                f"{self.position}: 'interleaved' or 'rotate_half', an even rotary_dim up to the head size "
                f"{self.q.shape[-1]}, theta > 1, a position in 0..500000",
            )

    def _turned(self, q, k, pairing, position):
        """q and k turned by RoPE (reference.rotary_embedding), the queries from `position`, the keys from 0."""
        turn = reference.rotary_embedding
        return (
            turn(q, pairing, self.rotary_dim, self.theta, position, "none", 1.0),
            turn(k, pairing, self.rotary_dim, self.theta, 0, "none", 1.0),
        )

    def _f64(self, name):
        return np.asarray(self.arrays[name], dtype=np.float64)

    def _from_qkv(self, path, arrays):
        q, k, v = (self._f64(n) for n in ("q", "k", "v"))
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.ndim < 2 or 0 in t.shape:
                refuse(path, f"{name!r} has shape {list(t.shape)}; it needs [..., tokens, head size], no empty axis")
        if k.shape[-2] != v.shape[-2] or q.shape[-1] != k.shape[-1]:
            refuse(
                path,
                f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: q and k need the same head size, "
                "k and v the same number of keys",
            )
        kv_heads = _scalar(path, arrays, "num_kv_heads", "i", None)
        if kv_heads is not None:
            self.headed = True
            if q.ndim < 3 or k.ndim < 3 or k.shape[-3] != kv_heads or v.shape[-3] != kv_heads or q.shape[-3] % kv_heads:
                refuse(
                    path,
                    f"num_kv_heads {kv_heads} needs q [..., N, T, H] with N a multiple of it and k, v "
                    f"[..., {kv_heads}, S, H]; got q {list(q.shape)}, k {list(k.shape)}",
                )
            self.heads, self.kv_heads, self.own_kv = q.shape[-3], kv_heads, (k, v)
            k, v = tolerance_model.share_kv_heads(k, q.shape[-3]), tolerance_model.share_kv_heads(v, q.shape[-3])
        self.q, self.k, self.v = q, k, v
        self.d_model = None
        self._check_shapes()

    def _from_x(self, path, arrays):
        x = self._f64("x")
        w = {n: self._f64(n) for n in ("w_query", "w_key", "w_value")}
        heads = _scalar(path, arrays, "num_heads", "i", 1)
        kv_heads = _scalar(path, arrays, "num_kv_heads", "i", heads)
        if x.ndim < 2 or any(t.ndim != 2 for t in w.values()) or any(t.shape[0] != x.shape[-1] for t in w.values()):
            refuse(
                path,
                f"x [..., T, D] and weights [D, columns]; got x {list(x.shape)}, "
                + ", ".join(f"{n} {list(t.shape)}" for n, t in w.items()),
            )
        if heads < 1 or kv_heads < 1 or heads % kv_heads or w["w_query"].shape[1] % heads:
            refuse(
                path,
                f"num_heads {heads} and num_kv_heads {kv_heads}: heads must divide w_query's "
                f"{w['w_query'].shape[1]} columns and be a multiple of num_kv_heads",
            )
        H = w["w_query"].shape[1] // heads
        if w["w_key"].shape[1] != kv_heads * H or w["w_value"].shape[1] != kv_heads * H:
            refuse(path, f"w_key and w_value need num_kv_heads x head size = {kv_heads * H} columns")
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
            return q, tolerance_model.share_kv_heads(k, self.heads), tolerance_model.share_kv_heads(v, self.heads)
        reps = self.heads // self.kv_heads
        return q, np.tile(k, (1,) * (k.ndim - 3) + (reps, 1, 1)), np.tile(v, (1,) * (v.ndim - 3) + (reps, 1, 1))

    def _check_shapes(self):
        path, T, S, H = self.path, self.q.shape[-2], self.k.shape[-2], self.v.shape[-1]
        try:
            lead = np.broadcast_shapes(self.q.shape[:-2], self.k.shape[:-2], self.v.shape[:-2])
        except ValueError:
            refuse(
                path,
                f"q {list(self.q.shape)}, k {list(self.k.shape)}, v {list(self.v.shape)}: "
                "leading axes do not broadcast (fewer K/V heads than query heads? give num_kv_heads)",
            )
        self.T, self.S, self.H = T, S, self.q.shape[-1]
        self.shape = lead + (T, H)
        mask = self.arrays.get("mask")
        if mask is not None:
            if mask.dtype != bool:
                refuse(path, f"'mask' is {mask.dtype}; it must be bool, True where a key is hidden")
            try:
                fits = np.broadcast_shapes(mask.shape, lead + (T, S)) == lead + (T, S)
            except ValueError:
                fits = False
            if not fits:
                refuse(path, f"'mask' {list(mask.shape)} does not broadcast to [..., T, S] = {list(lead + (T, S))}")
        self.mask = mask
        elements = int(np.prod(lead + (T, S)))
        if elements > MAX_SCORES:
            refuse(
                path,
                f"[..., T, S] = {list(lead + (T, S))} is {elements} scores; explain computes in float64 and "
                f"handles up to {MAX_SCORES} (a few heads or a slice of the batch show the same)",
            )
        self.hidden = tolerance_model.hidden_keys(T, S, mask, self.causal, self.window)
        self.bias, hides = self._bias(path, lead + (T, S))
        self.hidden = self.hidden | hides
        for name, want in (("out", lead + (T, H)), ("scores", lead + (T, S)), ("weights", lead + (T, S))):
            if name in self.arrays and tuple(self.arrays[name].shape) != tuple(want):
                refuse(path, f"{name!r} has shape {list(self.arrays[name].shape)}; these inputs give {list(want)}")

    def _bias(self, path, shape):
        """(the finite part of a float bias, where its -inf entries hide their keys, as the softmax makes them)."""
        if "bias" not in self.arrays:
            return None, False
        bias = self.arrays["bias"]
        if bias.dtype.kind != "f" and bias.dtype.name != "bfloat16":
            refuse(path, f"'bias' is {bias.dtype}: a float bias is added to the scores; a bool mask is 'mask'")
        bias = np.asarray(bias, dtype=np.float64)
        if np.isnan(bias).any() or np.isposinf(bias).any():
            refuse(path, "'bias' holds NaN or +inf: a bias is finite, or -inf where a key is hidden")
        try:
            fits = np.broadcast_shapes(bias.shape, shape) == shape
        except ValueError:
            fits = False
        if not fits or self.cap is not None:
            refuse(
                path,
                f"'bias' {list(bias.shape)} does not broadcast to [..., T, S] = {list(shape)}"
                if not fits
                else "'bias' with 'softcap': frameworks order the two differently; judge them apart",
            )
        return np.where(np.isneginf(bias), 0.0, bias), np.isneginf(bias)

    def compute(self, rounding=None, hidden=None, scale="given", q=None, k=None, v=None, over_queries=False, **more):
        """The attention the file states, or with one of its parts changed: `more` takes cap, sinks and
        cap_after_mask (tolerance_model.attend) and pairing and position (RoPE's)."""
        q, k = self.q if q is None else q, self.k if k is None else k
        if self.pairing is not None:
            q, k = self._turned(q, k, more.pop("pairing", self.pairing), more.pop("position", self.position))
        return tolerance_model.attend(
            q,
            k,
            self.v if v is None else v,
            self.hidden if hidden is None else hidden,
            self.scale if scale == "given" else scale,
            rounding,
            over_queries,
            cap=more.pop("cap", self.cap),
            sinks=more.pop("sinks", self.sinks),
            bias=more.pop("bias", self.bias),
            **more,
        )

    def bound(self, **arguments):
        """The derived bound on each output of compute(**arguments) in the dtype judged: from x and the
        weights when the file gives them (the projections round too), else from q, k and v."""
        if self.form == "x and weights" and not set("qkv") & set(arguments):

            def projected(x, w_query, w_key, w_value):
                q, k, v = self._project(dict(w_query=w_query, w_key=w_key, w_value=w_value), "repeat", x)
                return self.compute(q=q, k=k, v=v, **arguments)

            return tolerance_model.bound(self.dtype, projected, self.x, **self.weights_given)
        return tolerance_model.bound(self.dtype, self.compute, **(dict(q=self.q, k=self.k, v=self.v) | arguments))

    def describe(self):
        heads = f", {self.q.shape[-3]} heads" if self.headed else ""
        if self.headed and self.form == "x and weights" and self.kv_heads != self.heads:
            heads += f" over {self.kv_heads} K/V heads"
        elif self.headed and "num_kv_heads" in self.arrays:
            heads += f" over {int(self.arrays['num_kv_heads'])} K/V heads"
        scale = "1/sqrt(H)" if self.scale is None else repr(self.scale)
        masking = (", mask" if self.mask is not None else "") + (", causal (bottom-right)" if self.causal else "")
        masking += f", a window of {self.window}" if self.window else ""
        masking += f", soft cap {self.cap:g}" if self.cap is not None else ""
        masking += ", sinks" if self.sinks is not None else ""
        masking += ", an additive bias" if self.bias is not None else ""
        masking += f", RoPE {self.pairing} from position {self.position}" if self.pairing else ""
        return (
            f"out {list(self.shape)} {self.dtype}, from {self.form}: T {self.T}, S {self.S}, H {self.H}{heads}"
            f"{masking}, scale {scale}"
        )
