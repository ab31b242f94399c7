"""What turns the queries and keys of a Problem (tools/problem.py) before their product: QK-norm, then RoPE from
theta (scaled as long-context models ship it, or not) or from the caller's cos and sin tables; each as the oracle
computes it (reference.norms, reference.rotary, reference.rope_scaling), and each with the parts a port gets wrong
open to change (tools/conventions.py names them)."""

import contextlib

import numpy as np

from attention_conformance.adapters import reference
from attention_conformance.dtypes import np_dtype
from attention_conformance.tools.explain.forms import _per_row, refuse, scalar

NORM_KEYS = ("norm_weight_q", "norm_weight_k", "eps")
SCALING_KEYS = ("rope_type", "factor", "original_max_positions", "beta_fast", "beta_slow", "truncate")  # the spec's
ROPE_TYPES = ("linear", "llama3", "ntk", "dynamic", "yarn")  # reference.rotary's two, reference.rope_scaling's three
LLAMA3_ORIGINAL = int(reference.rotary._LLAMA3_ORIGINAL)  # its llama3 rule is Llama 3.1's config, this L0 with it


class QK:
    """QK-norm's and RoPE's statement of a Problem: `norm` and `scaling` (dicts, None where the file gives none),
    `pairing`, `rotary_dim`, `theta`, `tables`, `position_ids`."""

    def _qk_norm(self, path, arrays):
        """RMSNorm on q and k as given (before RoPE): weights [H] norm each head, [N x H] and [K x H] the projection."""
        self.norm = None
        if not any(name in arrays for name in NORM_KEYS):
            return
        heads, kv_heads = (self.heads, self.kv_heads) if self.headed else (1, 1)
        missing = [name for name in NORM_KEYS[:2] if name not in arrays]
        if missing:
            refuse(
                path, f"QK-norm without {' and '.join(missing)}: give norm_weight_q and norm_weight_k (eps with them)"
            )
        given = [arrays[name] for name in NORM_KEYS[:2]]
        if any(w.dtype.kind not in "fiu" and w.dtype.name != "bfloat16" for w in given):
            said = f"norm_weight_q {given[0].dtype}, norm_weight_k {given[1].dtype}"
            refuse(path, f"{said}: QK-norm's weights are numbers (bfloat16 ones: save them as float32)")
        weights = [np.asarray(w, dtype=np.float64) for w in given]
        eps = scalar(path, arrays, "eps", "fi", 1e-6)
        sizes = tuple(w.size if w.ndim == 1 else -1 for w in weights)
        over_heads = heads > 1 and sizes == (heads * self.H, kv_heads * self.H)
        finite = all(np.isfinite(w).all() for w in weights)
        if sizes != (self.H, self.H) and not over_heads or not finite or not 0 <= eps < 1:
            refuse(
                path,
                f"norm_weight_q {list(weights[0].shape)}, norm_weight_k {list(weights[1].shape)}, eps {eps!r}: "
                f"QK-norm's weights, both [H] ([{self.H}], each head normed: Qwen3, Gemma 3) or [N x H] and [K x H] "
                f"([{heads * self.H}] and [{kv_heads * self.H}], the whole projection: OLMo 2), finite; eps in [0, 1)"
                + ("" if self.headed else "; heads as [..., N, T, H] need num_kv_heads"),
            )
        axes = (-3, -1) if over_heads else (-1,)
        if eps == 0 and any((np.abs(t).max(axis=axes) == 0).any() for t in (self.q, self.k)):
            refuse(path, "eps 0 with a row of q or k all zeros: its norm is 0 / 0 (give the model's eps)")
        self.norm = dict(weights=tuple(weights), eps=eps, over_heads=over_heads, after_rope=False, eps_outside=False)

    def _rope(self, path, arrays, lead):
        """RoPE on q and k, where the file gives them before it: the pairing, rotary_dim, and theta (with a scaling)
        or the cos and sin tables; the queries from `position` or at their position_ids, the keys at 0..S-1 (at the
        position_ids too where T == S; in a packed row, both at their places in their documents)."""
        self.pairing = scalar(path, arrays, "pairing", "U", None)
        named = [n for n in ("cos", "sin", "position_ids", "q_rotated") + SCALING_KEYS if n in arrays]
        if self.documents is not None and "position_ids" in arrays:
            refuse(path, "'position_ids' with 'cu_seqlens': a packed row's tokens turn at their places in a document")
        if self.pairing is None:
            if named:
                refuse(path, f"{', '.join(named)} without 'pairing': RoPE needs its layout")
            return
        self.tables, self.position_ids = None, None
        if "cos" in arrays or "sin" in arrays:
            self._tables(path, arrays)
        default = self.q.shape[-1] if self.tables is None else 2 * self.tables[0].shape[-1]
        self.rotary_dim = scalar(path, arrays, "rotary_dim", "i", default)
        self.theta = float(scalar(path, arrays, "theta", "fi", 10000.0))
        if (
            self.pairing not in ("interleaved", "rotate_half")
            or not 2 <= self.rotary_dim <= self.q.shape[-1]
            or self.rotary_dim % 2
            or not 1 < self.theta < np.inf
        ):
            refuse(
                path,
                f"pairing {self.pairing!r}, rotary_dim {self.rotary_dim}, theta {self.theta}: 'interleaved' or "
                f"'rotate_half', an even rotary_dim up to the head size {self.q.shape[-1]}, theta > 1",
            )
        self.scaling = self._scaling(path, arrays)
        if self.tables is None:
            if self.valid is not None or "position_ids" in arrays:
                refuse(path, "RoPE at position_ids or with 'valid_length': give the tables cos, sin and position_ids")
            return
        rows = len(self.tables[0])
        if self.tables[0].shape[-1] * 2 != self.rotary_dim:
            refuse(path, f"cos and sin have {self.tables[0].shape[-1]} columns: rotary_dim / 2 ({self.rotary_dim})")
        if "position_ids" in arrays:
            ids = arrays["position_ids"]
            if (
                ids.dtype.kind not in "iu"
                or ids.shape[-1:] != (self.T,)
                or ids.ndim not in (1, 2)
                or (ids.ndim == 2 and (not lead or ids.shape[0] not in (1, lead[0])))
                or not ((0 <= ids) & (ids < rows)).all()
            ):
                refuse(
                    path,
                    f"'position_ids' {ids.dtype} {list(ids.shape)}: each query's row of cos and sin (0..{rows - 1}), "
                    f"[T] or [B, T] (T {self.T})",
                )
            self.position_ids = ids.astype(np.int64) if ids.ndim == 1 else _per_row(ids.astype(np.int64), lead)
        elif self.valid is not None:
            refuse(path, "RoPE with 'valid_length': give each query's position_ids")
        if max(self.S, self.position + self.T if self.position_ids is None else 0) > rows:
            refuse(
                path, f"cos and sin have {rows} rows: too few for the keys' positions 0..{self.S - 1} or the queries'"
            )

    def _tables(self, path, arrays):
        if "cos" not in arrays or "sin" not in arrays or "theta" in arrays:
            refuse(path, "RoPE's tables are 'cos' and 'sin' together, instead of 'theta'")
        cos, sin = self._f64("cos"), self._f64("sin")
        if cos.shape != sin.shape or cos.ndim != 2 or 0 in cos.shape or not np.isfinite([cos, sin]).all():
            refuse(path, f"cos {list(cos.shape)}, sin {list(sin.shape)}: finite tables [positions, rotary_dim / 2]")
        self.tables = (cos, sin)

    def _scaling(self, path, arrays):
        """RoPE scaling with theta (spec conventions.rope_scaling), its parameters named as the spec's scaled_rotary
        takes them; dynamic NTK's base at the sequence's length, its last position + 1 (transformers'), for the
        queries and the keys alike."""
        given = [name for name in SCALING_KEYS if name in arrays]
        if not given:
            return None
        rope_type = scalar(path, arrays, "rope_type", "U", None)
        factor = scalar(path, arrays, "factor", "fi", None)
        original = scalar(path, arrays, "original_max_positions", "i", None)
        if rope_type == "default" and given == ["rope_type"]:  # transformers' name for RoPE unscaled
            return None
        wrong = self._scaling_wrong(rope_type, factor, original, given, arrays)
        if wrong:
            refuse(path, f"RoPE scaling: {wrong}")
        beta_fast = float(scalar(path, arrays, "beta_fast", "fi", 32.0))
        beta_slow = float(scalar(path, arrays, "beta_slow", "fi", 1.0))
        if not 0 < beta_slow < beta_fast < np.inf:
            refuse(path, f"beta_fast {beta_fast!r}, beta_slow {beta_slow!r}: 0 < beta_slow < beta_fast (YaRN's 32, 1)")
        last = self.places.max() if self.documents is not None else max(self.S, self.position + self.T) - 1
        return dict(
            rope_type=rope_type,
            factor=float(factor),
            # the reference's NTK arithmetic reads L0 whatever the type; linear's and ntk's use none (1 stands in)
            original_max_positions=original or 1,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            truncate=bool(scalar(path, arrays, "truncate", "b", True)),
            length=int(last) + 1,  # as stated; _turned measures the positions a known difference turns at
            fixed_length=None,
            attention_factor=True,
            exponent_dims=None,
        )

    def _scaling_wrong(self, rope_type, factor, original, given, arrays):
        """What is wrong with the scaling's keys, the first rule broken, or None."""
        if rope_type == "default":
            return f"rope_type 'default' is RoPE unscaled, so {', '.join(given[1:])} say nothing: leave them out"
        if rope_type not in ROPE_TYPES:
            return (
                f"rope_type {rope_type!r}: one of {', '.join(ROPE_TYPES)} (transformers' rope_type), or 'default' "
                "alone for RoPE unscaled"
            )
        if self.tables is not None:
            return "rope_type with cos and sin: the tables hold any scaling already; give theta, or the tables alone"
        if factor is None or not 1 <= factor <= 1e6:
            return f"factor {factor!r}: rope_type {rope_type!r} needs a factor in [1, 1e6]"
        if rope_type in ("ntk", "dynamic") and self.rotary_dim < 4:
            return f"rotary_dim {self.rotary_dim} with {rope_type}: NTK's exponent R / (R - 2) needs R >= 4"
        if rope_type in ("dynamic", "yarn") and (original is None or original < 1):
            return (
                f"original_max_positions {original!r}: {rope_type} needs L0, the trained length >= 1 (transformers' "
                "yarn: rope_parameters' original_max_position_embeddings, else max_position_embeddings; dynamic: "
                "config.max_position_embeddings)"
            )
        if rope_type == "llama3" and original not in (None, LLAMA3_ORIGINAL):
            return (
                f"original_max_positions {original}: llama3 here is Llama 3.1's rule, L0 {LLAMA3_ORIGINAL}, "
                "low_freq_factor 1, high_freq_factor 4; for other values give transformers' own cos and sin tables "
                "(and no rope_type)"
            )
        if rope_type in ("linear", "ntk") and original is not None:
            return f"original_max_positions with {rope_type}: it takes no L0 (leave it out)"
        yarn_only = [name for name in ("beta_fast", "beta_slow", "truncate") if name in arrays]
        if yarn_only and rope_type != "yarn":
            return f"{', '.join(yarn_only)} with {rope_type}: YaRN's ramp only (leave them out)"
        return None

    def before_scores(self, q, k, rounding, more):
        """(q, k as they enter the scores, q's RoPE output or None), QK-norm before RoPE; `more`'s norm, pairing,
        position, keys_from_zero and scaling (popped) change what the file states."""
        norm = more.pop("norm", self.norm)
        steps = reference.rounding_to(np_dtype(rounding)) if rounding else contextlib.nullcontext()
        if norm is not None and not norm["after_rope"]:
            with steps:
                q, k = self._normed(q, k, norm)
        if self.pairing is None:
            return q, k, None
        q, k = self._turned(
            q,
            k,
            more.pop("pairing", self.pairing),
            more.pop("position", None),
            more.pop("keys_from_zero", False),
            more.pop("scaling", self.scaling),
        )
        if norm is not None and norm["after_rope"]:
            with steps:
                q, k = self._normed(q, k, norm)
        return q, k, q

    def _normed(self, q, k, norm):
        """q and k [..., N, T, H] (K/V heads shared to N) RMS-normed over each head's H dims or over the N x H of
        the projection (repeated K/V heads leave its mean of squares as the K x H's)."""
        normed = []
        for t, weight in zip((q, k), norm["weights"]):
            n, T, H = (t.shape[-3] if self.headed else 1), t.shape[-2], t.shape[-1]
            per_head = np.reshape(weight, (-1, 1, H))
            if norm.get("grouping") == "tile":  # K/V head n % K (the tiling mistake, command.py's _TILED)
                per_head = np.tile(per_head, (n * H // weight.size, 1, 1))
            else:
                per_head = np.repeat(per_head, n * H // weight.size, axis=0)  # [n, 1, H]
            if norm["over_heads"]:
                joined = np.reshape(np.swapaxes(t, -3, -2), t.shape[:-3] + (T, n * H))
                done = _rms(joined, np.reshape(per_head, (n * H,)), norm["eps"], norm["eps_outside"])
                normed.append(np.swapaxes(np.reshape(done, t.shape[:-3] + (T, n, H)), -3, -2))
            else:
                normed.append(_rms(t, per_head if self.headed else weight, norm["eps"], norm["eps_outside"]))
        return normed

    def _turned(self, q, k, pairing, position=None, keys_from_zero=False, scaling=None):
        """q and k turned by RoPE, the queries from `position` (None: as the file states) or at their position_ids,
        the keys from 0 (at the position_ids too where T == S; in a packed row, both at their places)."""
        if position is None and self.documents is not None:
            rows = keys = self.places
        elif position is None and self.position_ids is not None:
            rows = self.position_ids
            # no cache: each key is its query's token, at its position_ids
            keys = rows if self.T == self.S and not keys_from_zero else np.arange(self.S)
        else:
            rows, keys = (self.position if position is None else position) + np.arange(self.T), np.arange(self.S)
            if self.tables is None:  # stored before the turn, as reference.rotary_embedding stores what it turns
                (q,), (k,) = reference._f64(q), reference._f64(k)
        if scaling is not None:  # dynamic's base at the last position + 1 of those turned, unless one is fixed
            scaling = scaling | dict(length=scaling["fixed_length"] or int(max(np.max(rows), np.max(keys))) + 1)
        rows = rows if self.rows is None else rows[..., self.rows]  # a block's queries, after the base is set
        turn, R = reference.rotary._rotated, self.rotary_dim
        q = turn(q, *self._cos_sin(rows, scaling, q), pairing, R)
        return q, turn(k, *self._cos_sin(keys, scaling, k), pairing, R)

    def _cos_sin(self, positions, scaling, like):
        if self.tables is not None:
            return self.tables[0][positions], self.tables[1][positions]
        R, theta, s = self.rotary_dim, self.theta, scaling
        if s is None or s["rope_type"] in ("linear", "llama3"):
            kind, factor = ("none", 1.0) if s is None else (s["rope_type"], s["factor"])
            return reference.rotary._cos_sin(positions, R, theta, kind, factor, like)
        L0 = s["original_max_positions"]
        if s["exponent_dims"]:  # NTK's base raised with another count of dims: RoPE's own at that base
            base, _ = reference.rope_scaling._changed_base(
                s["exponent_dims"], theta, s["rope_type"], s["factor"], L0, s["length"]
            )
            return reference.rotary._cos_sin(positions, R, float(base), "none", 1.0, like)
        cos, sin = reference.rope_scaling._scaled_cos_sin(
            positions, s["length"], R, theta, s["rope_type"], s["factor"], L0, s["beta_fast"], s["beta_slow"],
            s["truncate"], like,
        )  # fmt: skip
        if not s["attention_factor"]:
            shrink = 1.0 / (0.1 * np.log(s["factor"]) + 1.0)
            return cos * shrink, sin * shrink
        return cos, sin

    def describe_qk(self):
        said = ""
        if self.norm is not None:
            said += f", QK-norm {'over the projection' if self.norm['over_heads'] else 'per head'}"
        if self.pairing:
            rows = "their position_ids" if self.position_ids is not None else f"position {self.position}"
            rows = "their places in their documents" if self.documents is not None else rows
            said += f", RoPE {self.pairing}{' from cos and sin' if self.tables else ''} at {rows}"
            if self.scaling is not None:
                s = self.scaling
                said += f", scaled {s['rope_type']} x{s['factor']:g}"
                said += f" from L0 {s['original_max_positions']}" if s["rope_type"] in ("dynamic", "yarn") else ""
        return said


def _rms(t, weight, eps, outside):
    """reference.norms' RMSNorm over t's last axis; with `outside`, x / (sqrt(mean(x^2)) + eps) times the weight."""
    if not outside:
        return reference.norms._rms_norm(t, weight, eps)
    (t,) = reference._f64(t)
    (normed,) = reference._f64(t / (np.sqrt(reference.fsum(t * t, axis=-1, keepdims=True) / np.shape(t)[-1]) + eps))
    return normed * weight
