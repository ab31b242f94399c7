"""`attention-conformance fuzz`: generated cases over the contract's forward ops, judged by the tolerance model.

    attention-conformance fuzz --adapter NAME [--examples N] [--seed S] [--dtype D] [--op OP ...] [--out DIR]

Hypothesis draws cases in the spec's own vocabulary (seeded uniform tensors `{uniform: [low, high],
shape, seed}`, fills, boolean masks, switches and words), so a finding is a spec case. The drawn
cases lean on the places where implementations go wrong: one token (T = 1), odd head sizes, long
sequences, large logits, near ties, masks that hide all keys but one, grouped-head ratios,
decoding offsets, square and cube shapes where a wrong layout still fits. Each output is judged
by attention_conformance.judge (|got - exact| <= k x max|plain - exact| + the bound derived for any
correct computation in the dtype, k from spec/model.yaml). The adapter's NOT_APPLICABLE keys and known divergences are
honoured: a key or divergence naming a spec case covers the generated cases that case stands for
(same op, same words and switches, a decoding offset or not, a fully masked row or not).

A run is deterministic for a seed (hypothesis with a fixed seed, no database, no deadline). On a
finding it shrinks it and writes, under --out (default ./fuzz-findings):
  <adapter>-<op>-<dtype>.yaml   the case, ready to paste under `cases:` in spec/attention.yaml
  <adapter>-<op>-<dtype>.py     a reproducer needing only the framework and NumPy: the adapter's
                                function inlined, the inputs and float64 expectation embedded
Exit codes: 0 no finding, 1 a finding, 2 wrong usage (one line on stderr).
"""

import ast
import base64
import builtins
import dataclasses
import inspect
import io
import math
import random
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np

from attention_conformance import contract, divergences, loader, plan

# The forward ops the fuzzer draws cases for (an adapter's missing or not-applicable ops are left out).
COVERED = (
    "project",
    "transposed_matmul",
    "scale",
    "softmax",
    "blend",
    "attention",
    "self_attention_v1",
    "self_attention_v2",
    "exercise_3_1",
    "causal_attention",
    "masked_attention",
    "multi_head_attention",
    "fused_attention",
    "decode_attention",
    "causal_flag",
    "grouped_attention",
    "grouped_fused_attention",
    "grouped_attention_layer",
    "mask_conventions",
    "attention_module",
    "layer_mask",
    "layer_key_padding",
)
INSTALL = "pip install 'attention-conformance[fuzz]' (or: pip install hypothesis==6.170.15)"
DEFAULT_OUT = "fuzz-findings"
SHRINK_CALLS = 150  # evaluations spent shrinking a finding, at most (counted, so a run stays deterministic)

# What the drawn numbers are: sizes and ranges chosen so that shrinking heads for the small and plain.
_TOKENS = (1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 128)  # T = 1 first (shrinking goes there), long T last
# Long rows where one row costs little: a softmax's keys, a blend's, a product's, and decoding's cache
# (its oracle computes every query: 4096 keys take 16 s there, so 1024).
_LONG_KEYS = (256, 1024, 4096)
_LONG_CACHE = (256, 1024)
_WIDTHS = (1, 2, 3, 4, 5, 7, 8, 16)  # d_in
_HEAD_SIZES = (1, 2, 3, 4, 5, 7, 8, 16)  # odd ones included
_BATCHES = (1, 2, 3)
_X_RANGES = ((-1.0, 1.0), (0.0, 1.0), (-3.0, 3.0), (0.999, 1.0))  # the last: near-equal tokens, near ties
_W_RANGES = ((-1.0, 1.0), (-0.5, 0.5), (-4.0, 4.0), (-0.035, 0.035))  # (-4, 4): large logits
_SCORE_RANGES = ((-1.0, 1.0), (-10.0, 10.0), (-100.0, 100.0), (-2000.0, 2000.0), (5.0, 5.001))
_FILLS = (0.0, 1.0, 0.5, -1.0)
_FRAMEWORK_PINS = {  # attention_conformance.numerics, the numeric switches only
    "torch": ["torch.set_float32_matmul_precision('highest')"],
    "tensorflow": ["tensorflow.config.experimental.enable_tensor_float_32_execution(False)"],
    "jax": [
        "jax.config.update('jax_default_matmul_precision', 'highest')",
        "jax.config.update('jax_enable_x64', True)",
    ],
}


class UsageError(Exception):
    pass


# --- drawing cases ------------------------------------------------------------------------------


def _strategy(ops):
    from hypothesis import strategies as st

    def tensor(draw, shape, ranges):
        kind = draw(st.integers(0, 11))
        if kind == 9:  # exact ties everywhere
            return {"fill": draw(st.sampled_from(_FILLS)), "shape": list(shape)}
        low, high = draw(st.sampled_from(ranges))
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        if kind == 10 and len(shape) == 2 and shape[0] * shape[1] <= 4096:
            # rank one: every row a multiple of one, so sums of them cancel (and scores tie) in bulk
            rows, columns = rng.uniform(low, high, shape[0]), rng.uniform(-1.0, 1.0, shape[1])
            return np.outer(rows, columns).astype(np.float32).tolist()
        if kind == 11 and len(shape) >= 1 and int(np.prod(shape)) <= 8192:
            # wide dynamic range: rows 1e-3..1e3 apart, so small terms ride on large ones
            rows = 10.0 ** rng.integers(-3, 4, size=tuple(shape[:-1]) + (1,))
            return (rng.uniform(low, high, tuple(shape)) * rows).astype(np.float32).tolist()
        return {"uniform": [low, high], "shape": list(shape), "seed": int(rng.integers(0, 2**16))}

    def mask(draw, lead, T, S, start=0):
        """True = hidden; every row keeps a key (a fully masked row is a convention, not a number)."""
        kind = draw(st.sampled_from(("none", "all_but_one", "random", "padding")))
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        shape = tuple(lead) + (T, S)
        if kind == "none":
            hidden = np.zeros(shape, dtype=bool)
        elif kind == "all_but_one":
            hidden = np.ones(shape, dtype=bool)
            keep = rng.integers(0, S, size=shape[:-1])
            np.put_along_axis(hidden, keep[..., None], False, axis=-1)
        elif kind == "random":
            hidden = rng.random(shape) < draw(st.sampled_from((0.5, 0.9)))
            empty = hidden.all(axis=-1)
            keep = rng.integers(0, S, size=shape[:-1])
            rows = np.argwhere(empty)
            for r in rows:
                hidden[tuple(r) + (keep[tuple(r)],)] = False
        else:
            hidden = np.zeros(shape, dtype=bool)
            hidden[..., S - int(rng.integers(0, S)) :] = True  # the last keys padded, key 0 never
            hidden[..., 0] = False
        return hidden.tolist()

    @st.composite
    def case(draw):
        op = draw(st.sampled_from(ops))
        form = draw(st.sampled_from(contract.FORMS[op]))
        lead = [draw(st.sampled_from(_BATCHES))] if form == "batched" else []
        T = draw(st.sampled_from(_TOKENS))
        D, H = draw(st.sampled_from(_WIDTHS)), draw(st.sampled_from(_HEAD_SIZES))
        shape_kind = draw(st.integers(0, 3))  # 0: square (d_in == d_out), 1: a cube (B == T == d), else any
        if shape_kind == 0:
            H = D
        elif shape_kind == 1 and lead:
            lead[0] = T = D = H = draw(st.sampled_from((2, 3, 4)))

        def x(t=T, d=D):
            return tensor(draw, lead + [t, d], _X_RANGES)

        def w(rows, cols):
            return tensor(draw, [rows, cols], _W_RANGES)

        if op == "project":
            return op, {"x": tensor(draw, [D] if form == "row" else [T, D], _X_RANGES), "w": w(D, H)}
        if op == "transposed_matmul":
            S = T if draw(st.booleans()) else draw(st.sampled_from(_TOKENS + _LONG_KEYS))
            return op, {"q": tensor(draw, lead + [T, H], _X_RANGES), "k": tensor(draw, lead + [S, H], _X_RANGES)}
        if op == "scale":
            return op, {
                "scores": tensor(draw, [T, T], _SCORE_RANGES),
                "d_k": draw(st.sampled_from((1, 2, 3, 4, 7, 16, 64))),
            }
        if op == "softmax":
            return op, {
                "scores": tensor(
                    draw, [T] if form == "row" else [T, draw(st.sampled_from(_TOKENS + _LONG_KEYS))], _SCORE_RANGES
                )
            }
        if op == "blend":
            S = draw(st.sampled_from(_TOKENS + _LONG_KEYS))
            return op, {"weights": tensor(draw, [T, S], ((0.0, 1.0),)), "v": tensor(draw, [S, H], _X_RANGES)}
        transposed = op in ("self_attention_v2", "exercise_3_1")  # nn.Linear's [d_out, d_in]
        if op in ("attention", "self_attention_v1", "self_attention_v2", "exercise_3_1", "causal_attention"):
            return op, {"x": x(), **{n: w(H, D) if transposed else w(D, H) for n in ("w_query", "w_key", "w_value")}}
        if op == "masked_attention":
            return op, {
                "x": x(),
                "w_query": w(D, H),
                "w_key": w(D, H),
                "w_value": w(D, H),
                "mask": mask(draw, [], T, T),
            }
        if op in ("decode_attention", "causal_flag"):
            if draw(st.integers(0, 4)) == 4:  # a long cache, the last few queries
                T = draw(st.sampled_from(_LONG_CACHE))
                start = T - draw(st.integers(1, 4))
            else:
                start = draw(st.integers(0, T - 1))
            return op, {"x": x(t=T), "w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H), "start": start}
        if op == "mask_conventions":
            return op, {
                "x": x(),
                "w_query": w(D, H),
                "w_key": w(D, H),
                "w_value": w(D, H),
                "mask": mask(draw, lead, T, T),
                "api": draw(st.sampled_from(contract.CHOICES["api"])),
                "fill": draw(st.sampled_from(contract.CHOICES["fill"])),
            }
        N = draw(st.sampled_from((1, 2, 3, 4)))
        if op in ("grouped_attention", "grouped_fused_attention", "grouped_attention_layer"):
            # (N, K) pairs, a third with 1 < K < N, where repeating and tiling K/V heads differ
            N, K = draw(st.sampled_from(((4, 2), (6, 3), (6, 2), (1, 1), (2, 1), (3, 3), (4, 1), (2, 2), (3, 1))))
            if op == "grouped_attention_layer":  # a layer: the model width is the input width
                D = N * H
            return op, {
                "x": x(d=D),
                "w_query": w(D, N * H),
                "w_key": w(D, K * H),
                "w_value": w(D, K * H),
                "num_heads": N,
                "num_kv_heads": K,
                "causal": draw(st.booleans()),
            }
        if op in ("multi_head_attention", "fused_attention"):
            inputs = {"x": x(), "w_query": w(D, N * H), "w_key": w(D, N * H), "w_value": w(D, N * H)}
            if op == "multi_head_attention":
                inputs["w_out"] = w(N * H, N * H)
            return op, inputs | {"num_heads": N, "causal": draw(st.booleans())}
        # The layers: model width E = N x H, weights in the reference form, biases drawn too.
        E = N * H
        inputs = {
            "x": x(d=E),
            **{n: w(E, E) for n in ("w_query", "w_key", "w_value", "w_out")},
            **{n: tensor(draw, [E], _W_RANGES) for n in ("b_query", "b_key", "b_value", "b_out")},
            "num_heads": N,
        }
        if op == "attention_module":
            return op, inputs | {
                "causal": draw(st.booleans()),
                "layer": draw(st.sampled_from(contract.LAYERS)),
                "checkpoint": draw(st.sampled_from(contract.CHOICES["checkpoint"])),
            }
        if op == "layer_mask":
            return op, inputs | {"mask": mask(draw, lead, T, T)}
        padding = np.zeros(lead + [T], dtype=bool)
        padded = draw(st.integers(0, T - 1))
        if padded:
            padding[..., T - padded :] = True
        return op, inputs | {"padding": padding.tolist(), "causal": draw(st.booleans())}

    return case()


# --- judging one case -------------------------------------------------------------------------


def _features(op, inputs):
    """What decides whether a spec case's NOT_APPLICABLE key or known divergence covers a generated
    case of the same op: its words and switches, whether it decodes at an offset, whether a row is
    fully masked, whether it is multi-query."""
    features = {}
    for name, value in inputs.items():
        if name == "fill" and inputs.get("api") != "additive":
            continue  # a boolean mask has no fill: the word is not read
        if isinstance(value, (bool, str)) and "#" not in str(value):
            features[name] = value
        elif name == "start":
            features["offset"] = value > 0
        elif name in ("mask", "padding") and isinstance(value, list):
            features["fully_masked"] = bool(np.asarray(value, dtype=bool).all(axis=-1).any())
        elif name == "num_kv_heads":  # one K/V head shared by several query heads; one head alone is plain attention
            features["multi_query"] = value == 1 and inputs.get("num_heads", 1) > 1
        elif name == "x" and len(_shape(value)) >= 2:
            features["one_token"] = _shape(value)[-2] == 1
    if "scores" in inputs and _shape(inputs["scores"]):  # a bfloat16 sum stops growing at 2**8 terms
        features["long_row"] = _shape(inputs["scores"])[-1] >= 256
    if len(_shape(inputs.get("x"))) >= 2:  # one query row in all (B = T = N = 1): XLA:CPU's bfloat16 dot fails
        features["one_query"] = math.prod(_shape(inputs["x"])[:-1]) * inputs.get("num_heads", 1) == 1
    if "num_heads" in inputs and len(_shape(inputs.get("x"))) >= 2:  # T = N = E: Keras's layer is wrong there
        T, E = _shape(inputs["x"])[-2:]
        features["cube_heads"] = T == inputs["num_heads"] == E > 1  # one of each: no axis to swap
    return features


def _shape(value):
    """A drawn or spec tensor's shape: {uniform or fill, shape} or the values themselves."""
    if isinstance(value, dict):
        return tuple(value.get("shape", ()))
    return np.shape(value) if isinstance(value, list) else ()


# The features that tell an op's spec cases apart where an adapter's NOT_APPLICABLE key or known
# divergence names one of them; an op not listed: every spec case of the op stands for every generated one.
_DECIDING = {
    "attention_module": ("layer", "cube_heads"),
    "decode_attention": ("offset",),
    "causal_flag": ("offset",),
    "softmax": ("long_row",),
    "masked_attention": ("fully_masked",),
    "fused_attention": ("one_query",),
    "mask_conventions": ("api", "fill", "fully_masked", "one_query"),
    "layer_mask": ("fully_masked", "cube_heads", "one_query"),
    "layer_key_padding": ("fully_masked", "cube_heads"),
    **{
        op: ("multi_query", "one_token")
        for op in ("grouped_attention", "grouped_fused_attention", "grouped_attention_layer")
    },
}


# A spec case on one token (one query) speaks for such generated cases only; the others for those too.
_NARROWING = ("one_token", "one_query")


def _twins(spec, op, inputs):
    """The spec cases a generated case of `op` stands with: same op, same deciding features. Where no
    spec case has them all, the last are let go one by one (a generated averaged-weights cube stands
    with the averaged-weights cases, the spec having no such cube)."""
    deciding = _DECIDING.get(op, ())
    mine = _features(op, inputs)
    cases = [(c, _features(op, c.inputs)) for c in spec.cases.values() if c.op == op]

    def same(theirs, f):
        return theirs.get(f) == mine.get(f) or (f in _NARROWING and not theirs.get(f))

    for n in range(len(deciding), -1, -1):
        twins = [c for c, theirs in cases if all(same(theirs, f) for f in deciding[:n])]
        if twins:
            return twins
    return []


def _fill_reached(kwargs):
    """Whether an additive mask of -1e9 ("large_negative") meets scaled scores of 1e8 or more: there the
    fill stops hiding keys (in bfloat16, s - 1e9 rounds in steps of 4e6), a limit of that convention."""
    if kwargs.get("fill") != "large_negative" or kwargs.get("api") != "additive":
        return False
    x, w_query, w_key = (np.asarray(kwargs[n], dtype=np.float64) for n in ("x", "w_query", "w_key"))
    largest = np.abs(x).max(initial=0.0) ** 2 * (np.abs(w_query).sum(axis=0) * np.abs(w_key).sum(axis=0)).sum()
    return largest / np.sqrt(w_query.shape[-1]) >= 1e8


def _imports_adapter(script_path):
    """Whether a written reproducer imports the adapter (NOT STANDALONE), so it runs only where fuzz ran."""
    return "# NOT STANDALONE" in Path(script_path).read_text()


def _float64(kwargs):
    """The inputs as the reference takes them: float arrays in float64, exactly; the rest as given."""
    return {
        n: np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) and v.dtype != bool else v
        for n, v in kwargs.items()
    }


@dataclasses.dataclass
class Finding:
    op: str
    inputs: dict
    dtype: str
    outputs: dict  # output -> Verdict (or None when the output is a shape or type mismatch)
    messages: dict  # output -> one line
    raised: str = None

    @property
    def failing(self):
        return sorted(self.messages)


class Fuzzer:
    def __init__(self, name, adapter, dtype, ops=None, divergences_as=None):
        from attention_conformance import judge

        self.name, self.adapter, self.dtype = name, adapter, dtype
        self.judge = judge
        self.model = judge.model()
        self.spec = loader.load()
        self.report_name = divergences_as or name
        self.divergences = divergences.declared(self.report_name, adapter)
        not_applicable = getattr(adapter, "NOT_APPLICABLE", {})
        self.ops = [op for op in (ops or COVERED) if hasattr(adapter, op) and op not in not_applicable]
        primary = adapter.DTYPES[0]
        self.planned = {
            (case.id, output)
            for case in self.spec.cases.values()
            for output, exp in case.expect.items()
            if plan.applies(self.spec, case, exp, dtype, primary)
        }  # the spec's dtype plan, case by case
        self.calls = 0
        self.judged = 0  # outputs compared with the model: 0 means the run said nothing
        self.excused = {}  # reason -> how many outputs it excused
        self.margin = 0.0  # the last case's worst margin: what a targeted search pushes up
        self.worst = None  # (margin, "op/output", the verdict's words): the closest a passing case came
        self.declared_worst = (0.0, 0, None)  # (largest margin, outputs, where) within a declared `within`

    def excuse(self, op, inputs, output):
        """Why this output of this generated case is not judged, or None."""
        reasons = getattr(self.adapter, "NOT_APPLICABLE", {})
        if self.dtype not in self.adapter.DTYPES:
            return f"{self.dtype} is not in the adapter's DTYPES"
        twins = _twins(self.spec, op, inputs)
        if not any((case.id, output) in self.planned for case in twins):  # the cases it stands with decide
            return f"the spec does not check {op}/{output} in {self.dtype} on cases like this one"
        keys = plan.keys_of(op, [twin.id for twin in twins], inputs, self.dtype, output)
        reason = next((reasons[k] for k in keys if k in reasons), None)
        if reason:
            return f"not applicable: {reason}"
        for case_id in [twin.id for twin in twins] + [plan.generated_case(op)]:
            reason = divergences.reason_for(
                plan.test_id(output, self.report_name, self.dtype, case_id), self.divergences
            )
            if reason and not getattr(reason, "bounded", False):
                return f"known divergence: {reason}"
        return None

    def declared(self, op, output):
        """The generated-case divergence that still bounds this output's results (divergences.Reason), or None."""
        reason = divergences.reason_for(
            plan.test_id(output, self.report_name, self.dtype, plan.generated_case(op)), self.divergences
        )
        return reason if getattr(reason, "bounded", False) else None

    def arrays(self, inputs):
        from attention_conformance.inputs import resolve

        with np.errstate(over="ignore"):  # a value beyond the dtype's range: evaluate() says so
            return {n: resolve(v, self.dtype, None) for n, v in inputs.items()}

    def expected(self, op, kwargs):
        """(exact, plain, derived) outputs of the reference on the inputs as the adapter received them:
        the exact answer, the plain computation's and the derived bound on a correct one's error."""
        from attention_conformance.adapters import reference
        from attention_conformance.contract import np_dtype

        as64 = _float64(kwargs)
        names = contract.OPS[op][1]

        def outputs(result):
            return result if len(names) > 1 else {names[0]: result}

        with np.errstate(all="ignore"):
            exact = outputs(getattr(reference, op)(**as64))
            plain_dtype = np_dtype(self.judge.plain_dtype(self.dtype))
            with reference.rounding_to(plain_dtype):
                plain = outputs(getattr(reference, op)(**as64))
        plain = {
            k: np.asarray(v).astype(plain_dtype).astype(np.float64) if np.asarray(v).dtype.kind == "f" else v
            for k, v in plain.items()
        }
        return exact, plain, self.derived(op, kwargs)

    def derived(self, op, kwargs, sums_in_dtype=False):
        """{output: the derived bound} on the inputs as the adapter received them."""
        from attention_conformance.adapters import reference

        as64 = _float64(kwargs)
        names = contract.OPS[op][1]
        with np.errstate(all="ignore"):
            found = self.judge.bound(self.dtype, getattr(reference, op), sums_in_dtype=sums_in_dtype, **as64)
        return found if len(names) > 1 else {names[0]: found}

    def evaluate(self, op, inputs):
        """A Finding if the adapter's outputs break the tolerance model on this case, else None."""
        self.calls += 1
        self.margin = 0.0
        names = contract.OPS[op][1]
        judged = []
        for o in names:
            reason = self.excuse(op, inputs, o)
            if reason:
                self.excused[reason] = self.excused.get(reason, 0) + 1
            else:
                judged.append(o)
        if not judged:
            return None
        kwargs = self.arrays(inputs)
        if _fill_reached(kwargs):
            reason = "logits near the -1e9 fill, where it no longer hides a key (the convention, not rounding)"
            self.excused[reason] = self.excused.get(reason, 0) + len(judged)
            return None
        if any(isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.isfinite(v).all() for v in kwargs.values()):
            reason = f"an input beyond {self.dtype}'s range"  # drawn wide, it rounds to inf: no case to judge
            self.excused[reason] = self.excused.get(reason, 0) + len(judged)
            return None
        try:
            # A framework's warning (Keras on a softmax over one key) is not a raise, whatever filters the
            # caller set (pytest's turn warnings into errors): the reproducer, run alone, would not raise.
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = getattr(self.adapter, op)(**kwargs)
        except Exception as exc:  # noqa: BLE001 - an adapter that raises on valid inputs is a finding
            text = (str(exc).strip().splitlines() or [""])[0][:300]
            return Finding(
                op,
                inputs,
                self.dtype,
                {},
                {o: f"raised {type(exc).__name__}: {text}" for o in judged},
                f"{type(exc).__name__}: {text}",
            )
        got = result if len(names) > 1 else {names[0]: result}
        try:
            exact, plain, derived = self.expected(op, kwargs)
        except self.judge.Overflow:  # the plain computation overflows: outside the model
            reason = f"a step beyond {self.dtype}'s range"
            self.excused[reason] = self.excused.get(reason, 0) + len(judged)
            return None
        k = self.model[self.dtype]
        verdicts, messages, summing = {}, {}, None
        for output in list(judged):
            stand_in = np.asarray(plain.get(output, 0.0))
            if stand_in.dtype.kind == "f" and not np.isfinite(stand_in).all() and np.isfinite(exact[output]).all():
                # the dtype's range, not rounding: a correct computation overflows too (the model sweep skips these)
                reason = f"the plain {self.judge.plain_dtype(self.dtype)} computation overflows"
                self.excused[reason] = self.excused.get(reason, 0) + 1
                judged.remove(output)
        for output in judged:
            if not isinstance(got, dict) or output not in got:
                messages[output] = f"missing from what {op}() returned"
                continue
            want = exact[output]
            try:
                value = np.asarray(got[output])
                if value.dtype.kind not in "biuf" and value.dtype.name != "bfloat16":
                    raise TypeError(value.dtype)
            except Exception as exc:  # noqa: BLE001 - whatever it returned is the adapter's doing
                messages[output] = f"not an array of numbers ({type(exc).__name__}: {exc})"
                continue
            if np.asarray(want).dtype.kind in "biu" or np.asarray(want).dtype == bool:
                if not np.array_equal(value, want):
                    messages[output] = f"got {value.tolist()!r} but should be {np.asarray(want).tolist()!r}"
                continue
            if value.shape != np.shape(want):
                messages[output] = f"shape {list(value.shape)} but should be {list(np.shape(want))}"
                continue
            verdict = self.judge.judge(output, self.dtype, value, want, plain[output], derived[output], k)
            verdicts[output] = verdict
            self.judged += 1
            declared = self.declared(op, output)
            if declared and not verdict.within:
                if declared.sums_in_dtype:
                    summing = summing or self.derived(op, kwargs, sums_in_dtype=True)
                    verdict = self.judge.judge(output, self.dtype, value, want, plain[output], summing[output], k)
                limit = declared.within or 1.0
                said = " of ".join(
                    [f"margin {limit:g}"] * (declared.within is not None)
                    + [f"the model summing in {self.dtype}"] * declared.sums_in_dtype
                )
                if verdict.margin <= limit:
                    reason = f"known divergence within {said}: {declared}"
                    self.excused[reason] = self.excused.get(reason, 0) + 1
                    largest, count, where = self.declared_worst
                    if verdict.margin > largest:
                        largest, where = verdict.margin, f"{op}/{output}, declared {said}"
                    self.declared_worst = (largest, count + 1, where)
                else:
                    messages[output] = f"margin {verdict.margin:.3g}, beyond even {said}: {verdict.describe()}"
                continue
            self.margin = max(self.margin, verdict.margin)
            if verdict.within and (self.worst is None or verdict.margin > self.worst[0]):
                self.worst = (verdict.margin, f"{op}/{output}", verdict.describe())
            if not verdict.within:
                messages[output] = f"margin {verdict.margin:.3g}: {verdict.describe()}"
        return Finding(op, inputs, self.dtype, verdicts, messages) if messages else None

    def run(self, examples, seed, shrink=SHRINK_CALLS):
        """The shrunk Finding of a run of `examples` generated cases, or None."""
        from hypothesis import HealthCheck, Phase, configuration, errors, find, settings, target

        if not self.ops:
            return None
        seen = {}  # repr(case) -> found?, so a replayed case gets the same answer
        spent = []

        def condition(case):
            key = repr(case)
            if key not in seen:
                if spent and len(spent) > shrink:  # the shrink budget is spent: nothing new is kept
                    return False
                seen[key] = self.evaluate(*case) is not None
                if not spent:
                    # Searching, the cases nearest a false alarm are bred from: a correct adapter is
                    # pushed towards its worst inputs, not only sampled (hypothesis' targeted search).
                    target(min(self.margin, 1e6), label="margin")
                if spent or seen[key]:
                    spent.append(key)
            return seen[key]

        phases = [Phase.generate, Phase.target, Phase.shrink] if shrink else [Phase.generate, Phase.target]
        config = settings(
            max_examples=examples,
            database=None,
            deadline=None,
            derandomize=False,
            phases=phases,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        try:
            # hypothesis keeps what it learns under ./.hypothesis unless told otherwise: nothing of a
            # run may land in the user's directory but --out
            with tempfile.TemporaryDirectory() as scratch, warnings.catch_warnings():
                previous = configuration.storage_directory(intent_to_write=False).home_directory
                configuration.set_hypothesis_home_dir(scratch)
                warnings.simplefilter("ignore", errors.HypothesisWarning)  # a drawn mask's repr is large: noise here
                try:
                    op, inputs = find(_strategy(self.ops), condition, settings=config, random=random.Random(seed))
                finally:
                    configuration.set_hypothesis_home_dir(previous)
        except errors.NoSuchExample:
            return None
        return self.evaluate(op, inputs)


# --- writing a finding ------------------------------------------------------------------------


def case_yaml(spec, finding, adapter_name):
    """The finding as a spec case (YAML text, indented to paste under `cases:`), and its id."""
    import yaml

    vocabulary = set(spec.vocabulary)
    op, inputs = finding.op, finding.inputs
    words = ["random"] + [w for w in op.split("_") if w in vocabulary and w != "random"]
    if inputs.get("causal") and "causal" not in words:
        words.append("causal")
    if "batched" not in words and len(_shape(inputs.get("x"))) == 3:
        words.append("batched")
    suffixes = (
        [[]]
        + [[a] for a in ("one", "two", "four", "x2", "x8", "1", "3")]
        + [[a, b] for a in ("one", "two", "four") for b in ("one", "two", "four", "x2", "x8", "1", "3")]
    )
    taken = set(spec.cases)
    case_id = next("_".join(words + s) for s in suffixes if "_".join(words + s) not in taken)
    twins = _twins(spec, op, inputs)
    family = next((c.family for c in twins), None) or next(c.family for c in spec.cases.values() if c.op == op)
    conventions = {c.convention for c in twins}
    raw = {"id": case_id, "family": family}
    if len(conventions) == 1 and None not in conventions:
        raw["convention"] = conventions.pop()
    note = f"Found by attention-conformance fuzz on {adapter_name} in {finding.dtype}: " + "; ".join(
        f"{o}: {m}" for o, m in sorted(finding.messages.items())
    )
    raw |= {"note": note[:600], "op": op, "inputs": inputs, "expect": {o: {"reference": True} for o in finding.failing}}
    text = yaml.safe_dump([raw], sort_keys=False, default_flow_style=None, width=120, allow_unicode=False)
    return case_id, textwrap.indent(text, "  ")


class CannotInline(Exception):
    pass


_INLINED_TOPS = {"attention_conformance", "tests"}


class _Inliner:
    """The source that defines a function standalone: its own source and, recursively, every suite
    function, class and constant it reaches; third-party modules are imported, as in the original."""

    def __init__(self, own_tops):
        self.tops = _INLINED_TOPS | set(own_tops)
        self.imports, self.blocks, self.prelude = [], [], []
        self.bound = {}  # emitted name -> the object it is
        self.parsed = {}  # file -> module AST
        self.namespaces = {}  # name -> (suite module, the attributes used of it)

    def _module_ast(self, g):
        file = g.get("__file__")
        if not file:
            raise CannotInline(f"module {g.get('__name__')} has no source file")
        if file not in self.parsed:
            source = Path(file).read_text()
            tree = ast.parse(source)
            self.parsed[file] = (tree, source)
            for node in tree.body:  # os.environ settings made before a framework's import
                if isinstance(node, ast.Assign) and "os.environ" in ast.unparse(node.targets[0]):
                    line = ast.unparse(node)
                    if line not in self.prelude:
                        self.prelude.append(line)
        return self.parsed[file]

    def _inlined(self, value):
        module = getattr(value, "__module__", None) or ""
        return module.split(".")[0] in self.tops

    def _bind(self, name, value):
        if name in self.bound:
            if self.bound[name] is not value:
                raise CannotInline(f"two different objects are both named {name!r}")
            return False
        self.bound[name] = value
        return True

    def _import(self, line):
        if line not in self.imports:
            self.imports.append(line)

    def need(self, name, g, attributes=None):
        if name not in g:
            return
        value = g[name]
        if name in vars(builtins) and value is vars(builtins)[name]:
            return
        if inspect.ismodule(value):
            if value.__name__.split(".")[0] in self.tops:  # a suite module used as a namespace: what is used of it
                members = self.namespaces.setdefault(name, (value, set()))
                if members[0] is not value:
                    raise CannotInline(f"two different modules are both named {name!r}")
                for attr in sorted(attributes or ()):
                    if attr not in members[1]:
                        members[1].add(attr)
                        self.need(attr, vars(value))
                return
            if self._bind(name, value):
                self._import(
                    f"import {value.__name__}" if name == value.__name__ else f"import {value.__name__} as {name}"
                )
            return
        if (inspect.isfunction(value) or inspect.isclass(value) or hasattr(value, "__wrapped__")) and self._inlined(
            value
        ):
            if "<locals>" in getattr(value, "__qualname__", ""):
                raise CannotInline(f"{name} is made at run time ({value.__qualname__})")
            if not self._bind(name, value):
                return
            source = textwrap.dedent(inspect.getsource(value))
            inner = inspect.unwrap(value)
            globals_ = inner.__globals__ if inspect.isfunction(inner) else vars(sys.modules[value.__module__])
            self._module_ast(globals_)
            self.walk(ast.parse(source), globals_)
            self.blocks.append(source + (f"\n{name} = {value.__name__}\n" if value.__name__ != name else ""))
            return
        if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value) or callable(value):
            module = getattr(value, "__module__", None)
            home = sys.modules.get(module) if module else None
            if inspect.isfunction(value) and getattr(home, value.__name__, None) is not value:
                # made by a factory (a closure) or renamed: `from module import name` would not find it
                raise CannotInline(f"{name} is made at run time ({module}.{value.__qualname__})")
            if module and self._bind(name, value):
                self._import(
                    f"from {module} import {value.__name__}" + (f" as {name}" if name != value.__name__ else "")
                )
            return
        # A constant: the statement that defines it at the top of its module, or its literal value.
        tree, source = self._module_ast(g)
        for node in tree.body:
            targets = [
                t
                for n in ([node] if isinstance(node, (ast.Assign, ast.AnnAssign)) else [])
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            ]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if self._bind(name, value):
                    self.walk(node.value, g)
                    self.blocks.append(ast.get_source_segment(source, node) + "\n")
                return
        try:
            text = repr(value)
            if ast.literal_eval(text) != value:
                raise ValueError
        except Exception:  # noqa: BLE001 - anything without a literal form
            raise CannotInline(f"{name} ({type(value).__name__}) has no source and no literal form") from None
        if self._bind(name, value):
            self.blocks.append(f"{name} = {text}\n")

    def walk(self, tree, g):
        names, attributes = [], {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in names:
                names.append(node.id)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attributes.setdefault(node.value.id, set()).add(node.attr)
        for name in names:
            self.need(name, g, attributes.get(name))

    def namespace_blocks(self):
        return [
            f"{name} = types.SimpleNamespace({', '.join(f'{a}={a}' for a in sorted(attrs))})\n"
            for name, (_, attrs) in self.namespaces.items()
        ]


def _repro_data(fuzzer, finding):
    """The arrays the adapter received and the failing outputs' expectation and allowed error, as npz bytes."""
    kwargs = fuzzer.arrays(finding.inputs)
    exact, plain, derived = fuzzer.expected(finding.op, kwargs)
    k = fuzzer.model[finding.dtype]
    arrays, scalars = {}, {}
    for name, value in kwargs.items():
        if isinstance(value, np.ndarray):
            arrays[f"in_{name}"] = value.astype(np.float32) if value.dtype.name == "bfloat16" else value
        else:
            scalars[name] = value
    for output in finding.failing:
        want = np.asarray(exact[output], dtype=np.float64)
        arrays[f"exact_{output}"] = want
        if want.dtype.kind == "f":
            with np.errstate(all="ignore"):
                arrays[f"allowed_{output}"] = np.broadcast_to(
                    fuzzer.judge.allowed(
                        finding.dtype, want, np.asarray(plain[output], dtype=np.float64), derived[output], k
                    ),
                    want.shape,
                )
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue(), scalars


# A backslash at a line's end continues the line: the reproducer's lines stay as they are, this file's within 120.
_REPRO_MAIN = """
# --- the case: inputs exactly as the adapter received them, and the float64 expectation ---------------
DTYPE = {dtype!r}
OP = {op!r}
FAILING = {failing!r}
SCALARS = {scalars!r}
DATA = np.load(io.BytesIO(base64.b64decode(
{blob})))


def main():
    dtype = np.dtype(DTYPE) if DTYPE != "bfloat16" else np.dtype(__import__("ml_dtypes").bfloat16)
    inputs = {{name[3:]: DATA[name].astype(dtype) if DATA[name].dtype.kind == "f" else DATA[name]
              for name in DATA.files if name.startswith("in_")}}
    try:
        result = {call}(**inputs, **SCALARS)
    except Exception as exc:  # the finding may be that it raises on valid inputs
        print(f"REPRODUCED: {{OP}}() in {{DTYPE}} raised {{type(exc).__name__}}: {{exc}}")
        return 1
    outputs = result if isinstance(result, dict) else {{FAILING[0]: result}}
    worst = 0.0
    for name in FAILING:
        expected = DATA["exact_" + name]
        got = np.asarray(outputs[name], dtype=np.float64)
        if got.shape != expected.shape:
            print(f"{{OP}} {{name}}: shape {{list(got.shape)}}, expected {{list(expected.shape)}}")
            worst = float("inf")
            continue
        allowed = DATA["allowed_" + name]
        error = np.abs(got - expected)
        ratio = np.where(np.isnan(got), np.inf, np.where(error == 0, 0.0, error / allowed))
        i = np.unravel_index(np.argmax(ratio), ratio.shape) if ratio.ndim else ()
        print(f"{{OP}} {{name}} in {{DTYPE}}: worst element {{[int(n) for n in i]}}: got {{float(got[i])!r}}, \
float64 expects "
              f"{{float(expected[i])!r}}, |error| {{error[i]:.3g}}, allowed {{allowed[i]:.3g}} \
({{ratio[i]:.3g}}x the allowance)")
        worst = max(worst, float(ratio[i]))
    print("REPRODUCED: beyond the allowed error" if worst > 1 else "not reproduced: within the allowed error")
    return 1 if worst > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
"""


def reproducer(fuzzer, finding, module_name):
    """A script needing only the framework and NumPy that calls the adapter's function on the case."""
    fn = getattr(fuzzer.adapter, finding.op)
    own = {getattr(fuzzer.adapter, "__name__", module_name).split(".")[0]}
    blob, scalars = _repro_data(fuzzer, finding)
    encoded = base64.b64encode(blob).decode()
    blob_text = "\n".join(f'    "{encoded[i : i + 100]}"' for i in range(0, len(encoded), 100))
    header = (
        f'"""Reproducer: {module_name}\'s {finding.op}() in {finding.dtype} against float64 attention.\n\n'
        f"Written by `attention-conformance fuzz`; it needs only the framework and NumPy.\n"
        + "".join(f"  {o}: {textwrap.shorten(m, 400)}\n" for o, m in sorted(finding.messages.items()))
        + 'Exit 1 when the error is beyond the allowance (the tolerance model of attention-conformance).\n"""\n\n'
    )
    try:
        inliner = _Inliner(own)
        inliner.need(finding.op, {finding.op: fn})
        pins = []
        for top in dict.fromkeys(line.split()[1].split(".")[0] for line in inliner.imports):
            alias = next(
                (line.split()[-1] for line in inliner.imports if line.split()[1] == top and line.startswith("import ")),
                None,
            )
            if top in _FRAMEWORK_PINS and alias is None:
                inliner.imports.append(f"import {top}")
                alias = top
            pins += [alias + p[len(top) :] for p in _FRAMEWORK_PINS.get(top, [])]
        body = (
            "import base64\nimport io\nimport sys\nimport types\n\n"
            + ("import os\n" + "\n".join(inliner.prelude) + "\n\n" if inliner.prelude else "")
            + "\n".join(inliner.imports + ["import numpy as np"] * ("import numpy as np" not in inliner.imports))
            + "\n\n"
            + "\n".join(pins)
            + "\n\n\n"
            + "\n\n".join(inliner.blocks + inliner.namespace_blocks())
        )
        call = finding.op
    except (CannotInline, OSError, TypeError) as exc:  # the function cannot be lifted out: import the adapter instead
        body = (
            f"# NOT STANDALONE: {exc}; so this imports {finding.op} from the adapter module "
            f"{getattr(fuzzer.adapter, '__name__', module_name)!r}: it needs that module importable (run it where "
            "`attention-conformance fuzz` ran) and whatever the module imports.\n"
            f"import base64\nimport io\nimport importlib\nimport os\nimport sys\n\nimport numpy as np\n\n"
            "sys.path.insert(0, os.getcwd())  # as `attention-conformance fuzz` finds a module beside you\n"
            f"_adapter = importlib.import_module({getattr(fuzzer.adapter, '__name__', module_name)!r})\n"
        )
        call = f"_adapter.{finding.op}"
    return (
        header
        + body
        + _REPRO_MAIN.format(
            dtype=finding.dtype,
            op=finding.op,
            failing=tuple(finding.failing),
            scalars=scalars,
            blob=blob_text,
            call=call,
        )
    )


def write(fuzzer, finding, out, module_name, seed):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{fuzzer.report_name.replace('.', '_')}-{finding.op}-{finding.dtype}"
    case_id, text = case_yaml(fuzzer.spec, finding, module_name)
    yaml_path, script_path = out / f"{stem}.yaml", out / f"{stem}.py"
    yaml_path.write_text(
        f"# attention-conformance fuzz --adapter {module_name} --seed {seed} --dtype {finding.dtype}: "
        f"paste under `cases:` in spec/attention.yaml\n{text}"
    )
    script_path.write_text(reproducer(fuzzer, finding, module_name))
    return case_id, yaml_path, script_path


# --- the command --------------------------------------------------------------------------------


def _base_name(name):
    """A wrong adapter tests.mutants.<adapter>__<bug> inherits its adapter's known divergences."""
    base = name.rsplit(".", 1)[-1].split("__")[0]
    return base if "__" in name and base in contract.NAMES else name


def main(adapter_name, examples=100, seed=0, dtype=None, out=DEFAULT_OUT, ops=None):
    try:
        import hypothesis  # noqa: F401 - only whether it is installed, before any work
    except ImportError:
        print(f"error: fuzz needs hypothesis: {INSTALL}", file=sys.stderr)
        return 2
    if examples < 1 or seed < 0:
        print("error: --examples must be at least 1 and --seed at least 0", file=sys.stderr)
        return 2
    unknown = [op for op in ops or () if op not in COVERED]
    if unknown:
        print(f"error: --op {unknown[0]} is not a forward op the fuzzer covers ({', '.join(COVERED)})", file=sys.stderr)
        return 2
    if Path(out).exists() and not Path(out).is_dir():
        print(f"error: --out {out}: not a directory (a finding's files go into it)", file=sys.stderr)
        return 2
    from attention_conformance import judge

    try:
        adapter = contract.load(adapter_name)
        judge.model()
    except (contract.AdapterError, judge.BadInput) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unmatched = plan.unmatched_not_applicable(loader.load(), adapter)
    if unmatched:  # as `run` refuses it: a typo would silently excuse nothing, or the wrong thing
        print(
            f"error: {adapter_name}'s NOT_APPLICABLE key {unmatched[0]!r} names no dtype, op, case, output or "
            "parameter value of the spec (`attention-conformance check` says more)",
            file=sys.stderr,
        )
        return 2
    dtype = dtype or adapter.DTYPES[0]
    if dtype not in adapter.DTYPES:
        print(
            f"error: {adapter_name} does not declare {dtype} (its DTYPES: {', '.join(adapter.DTYPES)})", file=sys.stderr
        )
        return 2
    fuzzer = Fuzzer(adapter_name, adapter, dtype, ops, _base_name(adapter_name))
    misnamed = plan.misnamed_generated(fuzzer.divergences, contract.OPS)
    if misnamed:
        print(
            f"error: known divergence {plan.declared_key(misnamed[0])!r} (test id {misnamed[0]}) names no op after "
            f"{plan.GENERATED} (a typo?)",
            file=sys.stderr,
        )
        return 2
    if not fuzzer.ops:
        print(
            f"error: {adapter_name} defines none of the ops asked for, or declares them not applicable in {dtype}",
            file=sys.stderr,
        )
        return 2
    finding = fuzzer.run(examples, seed)
    excused = sum(fuzzer.excused.values())
    summary = (
        f"{adapter_name} {dtype}: {fuzzer.calls} distinct cases of {examples} drawn, "
        f"over {len(fuzzer.ops)} ops, seed {seed}"
        + (
            f", {excused} outputs excused (not applicable, known divergences, or beyond the dtype's range)"
            if excused
            else ""
        )
        + (
            f", {fuzzer.declared_worst[1]} of them within a declared divergence's margin (the largest "
            f"{fuzzer.declared_worst[0]:.3g}, {fuzzer.declared_worst[2]})"
            if fuzzer.declared_worst[1]
            else ""
        )
    )
    if finding is None and not fuzzer.judged:  # said loudly: a run that judged nothing is no evidence
        print(f"ok: {summary}: no finding, but no output was judged (every one excused, or none drawn)")
        return 0
    if finding is None:
        closest = "" if fuzzer.worst is None else f"; worst margin {fuzzer.worst[0]:.3g} ({fuzzer.worst[1]})"
        print(f"ok: {summary}: no finding{closest}")
        return 0
    case_id, yaml_path, script_path = write(fuzzer, finding, out, adapter_name, seed)
    print(f"{summary}: stopped at the first finding")
    for output, message in sorted(finding.messages.items()):
        print(f"FINDING {finding.op}/{output}: {message}")
    print(
        f"case {case_id}: {yaml_path}\n"
        f"reproducer: {script_path} ("
        + (
            "not standalone: run it from this directory, where it imports the adapter; "
            if _imports_adapter(script_path)
            else ""
        )
        + f"python {script_path.name}: exit 1 while it reproduces)"
    )
    print(f"finding: {adapter_name} {finding.op}() in {dtype}, see {yaml_path}", file=sys.stderr)
    return 1


def kill_rate(adapter_name, mutants, examples, seed):
    """{mutant: (caught?, ops fuzzed, calls)} for wrong adapters whose changed ops the fuzzer covers,
    each fuzzed on those ops only (the other ops are the real adapter's own functions)."""
    real = contract.load(adapter_name)
    results = {}
    for mutant in mutants:
        module = contract.load(mutant)
        replaced = [op for op in contract.OPS if getattr(module, op, None) is not getattr(real, op, None)]
        covered = [op for op in replaced if op in COVERED]
        if not covered or getattr(module, "EXPECTED", "caught") != "caught":
            continue
        dtypes = getattr(module, "RUN_IN", module.DTYPES[:1])
        caught, calls = False, 0
        for dtype in dtypes:
            fuzzer = Fuzzer(mutant, module, dtype, covered, adapter_name)
            caught = fuzzer.run(examples, seed, shrink=0) is not None
            calls += fuzzer.calls
            if caught:
                break
        results[mutant] = (caught, covered, calls)
    return results


def percent(results):
    return 100.0 * sum(c for c, _, _ in results.values()) / len(results) if results else math.nan
