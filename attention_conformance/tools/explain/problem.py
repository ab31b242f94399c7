"""One attention as a user's FILE.npz states it, for `attention-conformance explain` (tools/explain/command.py):
the file read within limits and checked (every refusal one line naming the file and what to fix), and the
attention it holds computed in float64 by the oracle, plainly rounded, or bounded, as the model needs. The call
forms it takes are tools/forms.py's."""

import difflib
import stat
from pathlib import Path

import numpy as np

from attention_conformance import dtypes
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools.explain import forms, npz, qk
from attention_conformance.tools.explain.forms import BadInput, refuse, scalar

# What a file may give of the computation, in its order: each judged; the last one given sets the dtype judged.
STAGES = ("q_rotated", "scores", "scaled", "capped", "masked", "weights", "out")
INPUTS = (
    (
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
        "dtype",
        "window",
        "right_window",
        "chunk",
        "softcap",
        "sinks",
        "pairing",
        "rotary_dim",
        "theta",
        "position",
        "valid_length",
        "cu_seqlens",
        "cos",
        "sin",
        "position_ids",
        "bias",
    )
    + qk.NORM_KEYS
    + qk.SCALING_KEYS
    + STAGES
)
# The keys FILE.npz may hold and what each means: `explain --help` prints one a line, a refusal names them.
KEYS = (
    (
        "q, k, v",
        "[..., T, H], [..., S, H]; heads as [..., N, T, H] and [..., K, S, H] with num_kv_heads = K, or "
        "packed as [..., T, N x H] and [..., S, K x H] with num_heads = N (ONNX's 3D inputs)",
    ),
    (
        "x, w_query, w_key, w_value",
        "instead of q, k, v: [..., T, D], [D, columns]; with num_heads and num_kv_heads, "
        "out is per head, [..., N, T, H]",
    ),
    (
        "num_heads, num_kv_heads",
        "head counts N and K: with x and the weights; with q, k, v packed (out and q_rotated "
        "packed too, judged per head); K alone for q, k, v per head",
    ),
    ("out", "your result (required, unless you give only intermediates)"),
    ("mask", "bool, True = hidden (ONNX's bool attn_mask is True = attend: give ~attn_mask)"),
    ("causal", "True: each query sees the keys up to its own position"),
    (
        "position",
        "the first query's position among the keys (default S - T: bottom-right, the last query sees every "
        "key); causal, window and RoPE count from it: ONNX's past length, 0 for torch's top-left is_causal",
    ),
    (
        "valid_length",
        "[B], keys per batch row, the rest padding (hidden); row b's first query at valid_length[b] - T: "
        "ONNX's nonpad_kv_seqlen",
    ),
    (
        "cu_seqlens",
        "[n + 1] int, documents packed end to end in the row (flash-attn's, T == S): a query sees its own "
        "document's keys only, and RoPE's positions restart at 0 in each document",
    ),
    ("scale", "the scores' scale (default 1/sqrt(H))"),
    (
        "window, right_window",
        "a band of `window` keys up to the query's own, and `right_window` keys after it (default 0: causal)",
    ),
    ("chunk", "Llama 4's chunked attention: a query sees the keys of its own chunk of `chunk` positions from key 0"),
    ("softcap", "cap tanh(s / cap) before the bias and the mask; 0 is none"),
    (
        "bias",
        "float, broadcastable to [..., T, S], added to the capped scores: ONNX's and torch's float attn_mask, "
        "ALiBi's and T5's biases; -inf hides a key",
    ),
    ("sinks", "a logit per head joining each softmax"),
    (
        "norm_weight_q, norm_weight_k, eps",
        "QK-norm on q and k as given, before RoPE: x / sqrt(mean(x^2) + eps) x weight (eps default 1e-6); "
        "weights [H] norm each head (Qwen3, Gemma 3), [N x H] and [K x H] the whole projection (OLMo 2)",
    ),
    (
        "pairing",
        "'interleaved' or 'rotate_half': q and k before RoPE, keys at positions 0..S-1 (at position_ids where T == S)",
    ),
    ("rotary_dim, theta", "RoPE's rotated dims (default H) and base (10000)"),
    (
        "rope_type, factor",
        "RoPE scaling, with theta: 'linear', 'llama3' (Llama 3.1's), 'ntk', 'dynamic' (its base at the sequence's "
        "last position + 1, for queries and keys) or 'yarn' (cos and sin times 0.1 ln(factor) + 1); factor >= 1",
    ),
    (
        "original_max_positions",
        "L0, the length the model was trained on, for dynamic (transformers: config.max_position_embeddings) and "
        "yarn (original_max_position_embeddings); llama3 is Llama 3.1's rule: L0 8192, low and high freq factors 1 "
        "and 4 (for others, give transformers' cos and sin)",
    ),
    ("beta_fast, beta_slow, truncate", "yarn's ramp (default 32, 1 and True: its low end floored, its high ceiled)"),
    (
        "cos, sin, position_ids",
        "RoPE's tables instead of theta, [P, rotary_dim / 2], row p at position p; each "
        "query's row, [T] or [B, T] (default from position), each key's too where T == S (self-attention)",
    ),
    (
        "q_rotated",
        "q after RoPE (after QK-norm and RoPE, with the norm's keys): judged too; it shows RoPE's and the norm's "
        "mistakes that a bfloat16 out's allowance may hide",
    ),
    ("scores, scaled", "q k^T, and q k^T x scale (ONNX's qk_matmul_output mode 0): judged too"),
    (
        "capped, masked",
        "the scaled scores soft-capped (mode 1); then biased, -inf where hidden: the softmax's input "
        "(mode 2): judged too",
    ),
    ("weights", "the softmax's output (mode 3): judged too"),
    ("dtype", "the dtype judged, when the result is stored wider, e.g. 'bfloat16'"),
)
USAGE = "keys: " + "; ".join(names for names, _ in KEYS) + " (attention-conformance explain --help says what each is)"
_WIDTH = max(len(names) for names, _ in KEYS)
HELP = "\n".join(f"  {names:{_WIDTH}} {meaning}" for names, meaning in KEYS)


MAX_SCORES = 1 << 25  # [..., T, S] stages a file may give (judged whole): 256 MiB a float64 array, ~30 held


def load(path):
    """{name: array} from FILE.npz, every name known, nothing unpickled."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            refuse(path, "not a regular file")
        arrays = npz.read(path)
    except FileNotFoundError:
        refuse(path, "no such file")
    except npz.Unreadable as exc:
        raise BadInput(f"{path}: {exc}") from None
    except OSError as exc:
        refuse(path, f"not readable: {type(exc).__name__}: {exc}")
    unknown = sorted(set(arrays) - set(INPUTS))
    if unknown:
        near = difflib.get_close_matches(unknown[0], INPUTS, n=1)
        refuse(path, f"unknown key {unknown[0]!r}{f' (did you mean {near[0]!r}?)' if near else ''}; {USAGE}")
    return arrays


def _judged_dtype(path, arrays, judged):
    """The dtype judged: the last stage given's (`judged`), or the one `dtype` names, that stage stored wider."""
    out = arrays[judged]
    named = scalar(path, arrays, "dtype", "U", None)
    if named is not None:
        if named not in dtypes.DTYPES:
            refuse(path, f"dtype {named!r} is not one of {', '.join(dtypes.DTYPES)}")
        if out.dtype.kind == "V" and out.dtype.itemsize == 2 and named == "bfloat16":
            arrays[judged] = out.view(np_dtype("bfloat16"))
        elif out.dtype.kind != "f" and out.dtype.name != "bfloat16":
            refuse(path, f"{judged!r} is {out.dtype}, not floating point")
        stored = np.asarray(arrays[judged], dtype=np.float64)
        held = stored.astype(np_dtype(named)).astype(np.float64)
        off = ~((held == stored) | (np.isnan(held) & np.isnan(stored)))
        if off.any():
            at = tuple(int(i) for i in np.argwhere(off)[0])
            refuse(
                path,
                f"{judged!r} holds values that are not {named} numbers ({int(off.sum())} of {off.size}, the first "
                f"{float(stored[at])!r} at {list(at)}): give the {named} result itself, widened exactly (torch: "
                f"{judged}.float(); JAX or ml_dtypes: {judged}.astype(np.float32)), or leave dtype out to judge it "
                f"as the {arrays[judged].dtype} it is stored in",
            )
        return named
    if out.dtype.name not in dtypes.DTYPES:
        refuse(
            path,
            f"{judged!r} is {out.dtype}; the dtypes judged are {', '.join(dtypes.DTYPES)} (a bfloat16 result: "
            "save it as float32 and add dtype='bfloat16')",
        )
    return out.dtype.name


class Problem(forms.Forms, qk.QK):
    """One attention as the file states it, in float64: q [..., N, T, H] (N = 1 without heads)."""

    def __init__(self, path, arrays):
        self.path, self.arrays = path, arrays
        given = [name for name in STAGES if name in arrays]
        if not given:
            refuse(path, f"no 'out' (your result) and no intermediate; {USAGE}")
        self.judged = given[-1]
        self.dtype = _judged_dtype(path, arrays, self.judged)
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value") + STAGES:
            if name in arrays and (arrays[name].dtype.kind not in "fiu" and arrays[name].dtype.name != "bfloat16"):
                refuse(path, f"{name!r} is {arrays[name].dtype}, not numbers")
        for name in ("q", "k", "v", "x", "w_query", "w_key", "w_value"):
            extremes = (arrays[name].max(initial=0), arrays[name].min(initial=0)) if name in arrays else ()
            if not all(np.isfinite(e) for e in extremes):  # no copy: np.isfinite of a decode's cache took 0.4 s
                where = np.argwhere(~np.isfinite(arrays[name]))[0]
                refuse(path, f"{name!r} holds NaN or inf (at {[int(i) for i in where]}): explain judges finite inputs")
        self.causal = bool(scalar(path, arrays, "causal", "b", False))
        self.scale = scalar(path, arrays, "scale", "fi", None)
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
        self.headed = self.packed = False
        self.window = scalar(path, arrays, "window", "i", None)
        self.cap = scalar(path, arrays, "softcap", "fi", None)
        if self.window is not None and self.window < 1 or self.cap is not None and not 0 <= self.cap < np.inf:
            refuse(path, f"window {self.window!r}, softcap {self.cap!r}: a window is >= 1 key, a cap >= 0 (0: none)")
        if qkv:
            self._from_qkv(path, arrays)
        else:
            self._from_x(path, arrays)
        self._rope(path, arrays, self.shape[:-2])
        self._qk_norm(path, arrays)
        self.sinks = None
        if "sinks" in arrays:
            self.sinks = self._f64("sinks")
            heads = self.q.shape[-3] if self.headed else 1
            if self.sinks.shape not in ((), (heads,)) or not np.isfinite(self.sinks).all():
                refuse(path, f"'sinks' {list(self.sinks.shape)}: one finite logit, or one per head ({heads})")
            if self.headed and self.sinks.ndim == 0:
                self.sinks = np.full(heads, float(self.sinks))

    def _check_shapes(self):
        k_shape, v_shape = self.kv_shapes()
        path, T, S, H = self.path, self.q.shape[-2], k_shape[-2], v_shape[-1]
        try:
            lead = np.broadcast_shapes(self.q.shape[:-2], k_shape[:-2], v_shape[:-2])
        except ValueError:
            refuse(
                path,
                f"q {list(self.q.shape)}, k {list(k_shape)}, v {list(v_shape)}: "
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
        self.scores = int(np.prod(lead + (T, S)))
        wide = [name for name in STAGES[1:-1] if name in self.arrays]
        if self.scores > MAX_SCORES and wide:
            refuse(
                path,
                f"[..., T, S] = {list(lead + (T, S))} is {self.scores} scores: past {MAX_SCORES}, explain judges out "
                f"and q_rotated a block of query rows at a time, never the whole {wide[0]!r} (leave it out)",
            )
        self._positions(path, self.arrays, lead)
        self._documents(path, self.arrays)
        self.bias, self.bias_hides = self._bias(path, lead + (T, S))
        # Streamed past STREAM_FROM scores, or k and v shared to every query head (a decode over a long cache: 16
        # heads over 65536 keys held 5 GB whole, an outside trial measured): blocks.py's blocks hold their own.
        shared = int(np.prod(k_shape))
        self.streams = not wide and max(self.scores, shared) > forms.STREAM_FROM
        self.hidden = None if self.streams else self.keys_hidden()
        shapes = dict(q_rotated=lead + (T, self.H), out=lead + (T, H))
        for name in STAGES:
            want = shapes.get(name, lead + (T, S))
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
        if not fits:
            refuse(path, f"'bias' {list(bias.shape)} does not broadcast to [..., T, S] = {list(shape)}")
        return np.where(np.isneginf(bias), 0.0, bias), np.isneginf(bias)

    def compute(self, rounding=None, hidden=None, scale="given", q=None, k=None, v=None, over_queries=False, **more):
        """The attention the file states, or with one of its parts changed: `more` takes cap, sinks, bias,
        cap_after_mask and bias_before_cap (tolerance_model.attend) and norm, pairing, position, keys_from_zero and
        scaling (QK.before_scores)."""
        q = self.q if q is None else q
        q = q if self.rows is None else q[..., self.rows, :]  # a block's queries (blocks.py); norm and RoPE are per row
        q, k, rotated = self.before_scores(q, self.k if k is None else k, rounding, more)
        bias = more.pop("bias", self.bias)
        if hidden is None:  # a streamed problem's blocks hold theirs; computed whole, it is made here
            hidden = self.keys_hidden() if self.hidden is None else self.hidden
        found = tolerance_model.attend(
            q,
            k,
            self.v if v is None else v,
            hidden,
            self.scale if scale == "given" else scale,
            rounding,
            over_queries,
            cap=more.pop("cap", self.cap),
            sinks=more.pop("sinks", self.sinks),
            bias=None if bias is None else self.sliced(bias),
            **more,
        )
        if rotated is not None:
            found["q_rotated"] = (
                np.asarray(rotated).astype(np_dtype(rounding)).astype(np.float64) if rounding else rotated
            )
        return found

    def bound(self, **arguments):
        """The derived bound on each output of compute(**arguments) in the dtype judged: from x and the
        weights when the file gives them (the projections round too), else from q, k and v. A hidden key's
        -inf in the softmax's input is the only answer there: its bound is 0."""
        if self.form == "x and weights" and not set("qkv") & set(arguments):

            def projected(x, w_query, w_key, w_value):
                q, k, v = self._project(dict(w_query=w_query, w_key=w_key, w_value=w_value), "repeat", x)
                return self.compute(q=q, k=k, v=v, **arguments)

            found = tolerance_model.bound(self.dtype, projected, self.x, **self.weights_given)
        else:
            found = tolerance_model.bound(self.dtype, self.compute, **(dict(q=self.q, k=self.k, v=self.v) | arguments))
        if not arguments.get("cap_after_mask"):
            hidden = arguments.get("hidden", self.hidden)
            found["masked"] = np.where(hidden, 0.0, found["masked"])
        return found

    def describe(self):
        heads = f", {self.q.shape[-3]} heads" if self.headed else ""
        if self.headed and (self.kv_heads != self.heads or self.form == "q/k/v" and "num_kv_heads" in self.arrays):
            heads += f" over {self.kv_heads} K/V heads"
        heads += " (packed [..., T, N x H], judged per head)" if self.packed else ""
        scale = "1/sqrt(H)" if self.scale is None else repr(self.scale)
        masking = (", mask" if self.mask is not None else "") + (", causal" if self.causal else "")
        masking += f", a window of {self.window}" if self.window else ""
        masking += f" and {self.right_window} after" if self.right_window else ""
        masking += f", chunks of {self.chunk}" if self.chunk else ""
        if self.documents is not None:
            masking += f", {self.documents[-1] + 1} packed documents"
        if self.valid is not None:
            masking += f", valid lengths {[int(n) for n in self.valid.ravel()]}"
        elif (self.causal or self.window) and self.position != self.S - self.T:
            masking += f", the first query at position {self.position}"
        elif self.causal or self.window:
            masking += " (bottom-right)"
        masking += f", soft cap {self.cap:g}" if self.cap is not None else ""
        masking += ", sinks" if self.sinks is not None else ""
        masking += ", an additive bias" if self.bias is not None else ""
        masking += self.describe_qk()
        return (
            f"{self.judged} {list(self.arrays[self.judged].shape)} {self.dtype}, from {self.form}: T {self.T}, "
            f"S {self.S}, H {self.H}{heads}{masking}, scale {scale}"
        )
