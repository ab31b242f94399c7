"""The call forms `explain` states (tools/problem.py's Problem is one): q, k and v per head or packed as
[..., T, N x H]; x and the weights; and the keys each query sees, from the first query's position, each batch row's
valid length or the packed documents. What turns q and k before their product is tools/qk.py's."""

import functools
import os

import numpy as np

from attention_conformance.adapters import reference
from attention_conformance.cases import input_values
from attention_conformance.run import tolerance_model

# Past STREAM_FROM [..., T, S] scores, explain computes a block of query rows at a time (blocks.py), each block
# BLOCK_SCORES: 16 MiB a float64 array, and attend and its bound hold about 30 of them. The whole [..., T, S] at
# once held 250 bytes a score (2.07 GB at 2**23, measured: T = S = 1024, 8 heads). Blocks of 2**19 took a Llama-3-8B
# prefill 568 s where 2**21 took 464 s (each block splits its keys for the exact products again; issue 73).
STREAM_FROM = BLOCK_SCORES = 1 << 21
# The float64 arrays of q's size explain holds at most (the file's q and result, the three answers; the allowance is
# judged a piece at a time), k's and v's (held as the file gives them, widened a K/V head at a time), and a block's
# scores: the peak memory of the Llama-3-8B prefill and the 131,072-key decode in docs/speed.md ("explain at real
# sizes") is 0.9 of this estimate.
Q_COPIES, KV_COPIES, BLOCK_COPIES = 6, 1, 30


class BadInput(tolerance_model.BadInput):
    pass


def refuse(path, message):
    raise BadInput(f"{path}: {message}")


def scalar(path, arrays, name, kind, default):
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


def fits(path, q, kv, scores):
    """Refuse, in one line, inputs whose float64 arrays would not fit in this machine's free memory: `q` and `kv` the
    elements of q and of k and v, `scores` those of [..., T, S]."""
    held = 8 * (q * Q_COPIES + kv * KV_COPIES + (scores if scores <= STREAM_FROM else BLOCK_SCORES) * BLOCK_COPIES)
    inputs = q + kv
    free = _free_bytes()
    if free is not None and held > 0.8 * free:
        refuse(
            path,
            f"q, k and v of {inputs} elements need about {held / 2**30:.1f} GiB in float64, and this machine has "
            f"{free / 2**30:.1f} GiB free: save fewer heads (with their K/V heads) or a slice of the batch "
            "(explain --rows judges fewer query rows, not fewer keys)",
        )


def _free_bytes():
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def unpacked(t, heads):
    """[..., T, n x H] -> [..., n, T, H], head n the columns n*H:(n+1)*H (a reshape: no number changes)."""
    return np.swapaxes(np.reshape(t, t.shape[:-1] + (heads, t.shape[-1] // heads)), -3, -2)


def _per_row(a, lead):
    """[B, ...] laid out to broadcast against [*lead, ...], lead's first axis the batch."""
    return np.reshape(a, a.shape[:1] + (1,) * (len(lead) - 1) + a.shape[1:])


class Forms:
    """The inputs of a Problem as the oracle takes them: q [..., N, T, H] (N = 1 without heads), k and v shared to
    N heads, the keys hidden from each query, and RoPE's turn. `rows`, set on a block (tools/explain/blocks.py),
    is the query rows it computes (a slice, or indices, of the T); None computes them all."""

    rows = None

    # K/V heads shared to the N query heads on first use: blocks.py streams a decode over a long cache without them.
    k = functools.cached_property(lambda self: tolerance_model.share_kv_heads(self.own_kv[0], self.heads))
    v = functools.cached_property(lambda self: tolerance_model.share_kv_heads(self.own_kv[1], self.heads))

    def kv_shapes(self):
        """k's and v's shapes, shared to every query head, without sharing them."""
        if "k" in vars(self) or not self.headed:
            return self.k.shape, self.v.shape
        return tuple(t.shape[:-3] + (self.heads,) + t.shape[-2:] for t in self.own_kv)

    def sliced(self, a):
        """`a`, broadcastable to [..., T, S] or [..., T, H], cut to the block's query rows."""
        if self.rows is None or np.ndim(a) < 2 or np.shape(a)[-2] == 1:
            return a
        return a[..., self.rows, :]

    def _f64(self, name):
        return np.asarray(self.arrays[name], dtype=np.float64)

    def _held(self, name):
        """k or v as the file gives them, in float32 where its numbers are float32 or narrower (the same numbers in
        half float64's bytes: a decode's cache is gigabytes); the oracle widens each part it computes with."""
        a = self.arrays[name]
        narrow = a.dtype.name == "bfloat16" or a.dtype.kind == "f" and a.dtype.itemsize <= 4
        return np.asarray(a, dtype=np.float32 if narrow else np.float64)

    def _from_qkv(self, path, arrays):
        heads = scalar(path, arrays, "num_heads", "i", None)
        if heads is not None:
            self._unpack(path, arrays, heads)
        q, k, v = self._f64("q"), self._held("k"), self._held("v")
        arrays |= dict(q=q, k=k, v=v)  # the same numbers: the file's copies let go (a long cache's are gigabytes)
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.ndim < 2 or 0 in t.shape:
                refuse(path, f"{name!r} has shape {list(t.shape)}; it needs [..., tokens, head size], no empty axis")
        if k.shape[-2] != v.shape[-2] or q.shape[-1] != k.shape[-1]:
            refuse(
                path,
                f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: q and k need the same head size, "
                "k and v the same number of keys",
            )
        kv_heads = scalar(path, arrays, "num_kv_heads", "i", heads)
        if kv_heads is not None:
            self.headed = True
            if q.ndim < 3 or k.ndim < 3 or k.shape[-3] != kv_heads or v.shape[-3] != kv_heads or q.shape[-3] % kv_heads:
                refuse(
                    path,
                    f"num_kv_heads {kv_heads} needs q [..., N, T, H] with N a multiple of it and k, v "
                    f"[..., {kv_heads}, S, H]; got q {list(q.shape)}, k {list(k.shape)}",
                )
            self.heads, self.kv_heads, self.own_kv = q.shape[-3], kv_heads, (k, v)
        else:
            self.k, self.v = k, v
        fits(path, q.size, k.size + v.size, q.size // q.shape[-1] * k.shape[-2])
        self.q = q
        self.d_model = None
        self._check_shapes()

    def _unpack(self, path, arrays, heads):
        """q, k and v packed as [..., T, N x H] and [..., S, K x H] (ONNX's 3D inputs, a fused projection's output),
        and out and q_rotated as q: each read per head."""
        kv_heads = scalar(path, arrays, "num_kv_heads", "i", heads)
        q, k, v = (arrays[n] for n in ("q", "k", "v"))
        # Shapes cannot tell per-head inputs from packed ones: read as packed, per-head q, k and v would be judged
        # against another attention, so inputs that look per head are refused rather than misread.
        if q.ndim >= 3 and k.ndim >= 3 and (q.shape[-3], k.shape[-3]) == (heads, kv_heads):
            refuse(
                path,
                f"q {list(q.shape)}, k {list(k.shape)} look per head ([..., N, T, H]): give num_kv_heads alone; "
                "num_heads is for heads packed as [..., T, N x H] (a batch of N rows of those: reshape them per head)",
            )
        fits = heads >= 1 and kv_heads >= 1 and all(t.ndim >= 2 and t.shape[-1] for t in (q, k, v))
        if fits:
            fits = not (q.shape[-1] % heads or k.shape[-1] % kv_heads or v.shape[-1] % kv_heads)
            fits = fits and q.shape[-1] // heads == k.shape[-1] // kv_heads and heads % kv_heads == 0
        if not fits:
            refuse(
                path,
                f"num_heads {heads} and num_kv_heads {kv_heads} with q {list(q.shape)}, k {list(k.shape)}, v "
                f"{list(v.shape)}: packed heads are q [..., T, N x H], k and v [..., S, K x H], N a multiple of K",
            )
        for name, columns in (("out", heads * (v.shape[-1] // kv_heads)), ("q_rotated", q.shape[-1])):
            if name in arrays and (arrays[name].ndim < 2 or arrays[name].shape[-1] != columns):
                refuse(path, f"{name!r} has shape {list(arrays[name].shape)}; packed heads give [..., T, {columns}]")
        for name, n in (("q", heads), ("k", kv_heads), ("v", kv_heads), ("out", heads), ("q_rotated", heads)):
            if name in arrays:
                arrays[name] = unpacked(arrays[name], n)
        self.packed = True

    def _from_x(self, path, arrays):
        x = self._f64("x")
        w = {n: self._f64(n) for n in ("w_query", "w_key", "w_value")}
        heads = scalar(path, arrays, "num_heads", "i", 1)
        kv_heads = scalar(path, arrays, "num_kv_heads", "i", heads)
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

    def _positions(self, path, arrays, lead):
        """Where the queries stand among the keys: `position`, the first query's (default S - T, bottom-right), or
        each batch row's valid length, its keys past it padding and its first query at valid_length - T."""
        T, S = self.T, self.S
        self.position = scalar(path, arrays, "position", "i", S - T)
        self.right_window = scalar(path, arrays, "right_window", "i", 0)
        if not 0 <= self.position <= 500_000 or self.right_window < 0 or self.right_window and not self.window:
            refuse(
                path,
                f"position {self.position}, right_window {self.right_window}: a position in 0..500000; "
                "right_window >= 0, the keys past the query's own that a window shows (it needs window)",
            )
        self.chunk = scalar(path, arrays, "chunk", "i", None)
        if self.chunk is not None and (self.chunk < 1 or "valid_length" in arrays):
            refuse(path, f"chunk {self.chunk}: Llama 4's chunks hold 1 position or more, and take no valid_length")
        self.valid = None
        if "valid_length" not in arrays:
            return
        valid = arrays["valid_length"]
        if (
            "position" in arrays
            or valid.dtype.kind not in "iu"
            or valid.ndim != 1
            or not lead
            or valid.shape[0] not in (1, lead[0])
            or not ((0 <= valid) & (valid <= S)).all()
        ):
            refuse(
                path,
                f"'valid_length' {valid.dtype} {list(valid.shape)}: one integer 0..S ({S}) per batch row "
                f"(axis 0 of {list(lead)}), not with 'position' (row b's first query is at valid_length[b] - T)",
            )
        self.valid = _per_row(valid.astype(np.int64), lead)[..., None, None]

    def _documents(self, path, arrays):
        """Documents packed end to end in the row, cut at cu_seqlens: each token's document, and its place in it."""
        self.documents = self.places = None
        if "cu_seqlens" not in arrays:
            return
        cuts = arrays["cu_seqlens"]
        if (
            cuts.dtype.kind not in "iu"
            or cuts.ndim != 1
            or not input_values.offsets(cuts.tolist())
            or cuts[-1] != self.S
            or self.T != self.S
            or "position" in arrays
            or "valid_length" in arrays
        ):
            refuse(
                path,
                f"'cu_seqlens' {cuts.dtype} {list(cuts.shape)}: 0, then each document's end, increasing, the last "
                f"S ({self.S}, at most {input_values.MAX_TOKENS}); a packed row has T == S ({self.T} here), and no "
                "position or valid_length",
            )
        self.documents = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
        self.places = np.arange(self.S) - cuts[self.documents]

    def keys_hidden(self, **changes):
        """True where a query may not see a key, as the file states it or with `changes` (mask, causal, window,
        right, position, valid, documents, chunk, chunk_origin, chunk_position): the mask; causal order and the window
        from each query's position; a row's keys past its valid length; another document's keys; a key of another of
        Llama 4's chunks, counted from position chunk_origin (the queries' from chunk_position, default theirs); the
        keys the bias hides."""
        s = dict(mask=self.mask, causal=self.causal, window=self.window, right=self.right_window, position=None)
        s = s | dict(valid=self.valid, documents=self.documents, chunk=self.chunk, chunk_origin=0) | changes
        position = s["position"]
        if position is None:
            position = self.position if s["valid"] is None else s["valid"] - self.T
        rows = np.arange(self.T) if self.rows is None else np.arange(self.T)[self.rows]
        mask = None if s["mask"] is None else self.sliced(s["mask"])
        hidden = tolerance_model.hidden_keys(
            self.T, self.S, mask, s["causal"], s["window"], position, s["right"], rows=rows
        )
        if s["valid"] is not None:
            hidden = hidden | (np.arange(self.S) >= s["valid"])
        if s["documents"] is not None:
            hidden = hidden | (s["documents"][rows, None] != s["documents"][None, :])
        if s["chunk"]:
            queries, keys = s.get("chunk_position", position) + rows - s["chunk_origin"], np.arange(self.S)
            hidden = hidden | ((queries[:, None] // s["chunk"]) != (keys - s["chunk_origin"]) // s["chunk"])
        return hidden | self.sliced(self.bias_hides)
