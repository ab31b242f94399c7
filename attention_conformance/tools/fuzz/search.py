"""Judging one generated case: the adapter's outputs against the float64 oracle by the tolerance model,
with the adapter's NOT_APPLICABLE keys and known divergences honoured through the spec cases the
generated case stands with (its twins), and the search and shrinking of a finding."""

import collections
import dataclasses
import math
import random
import tempfile
import warnings

import numpy as np

from attention_conformance import sides
from attention_conformance.cases import divergences, generated, loader, plan
from attention_conformance.contract import ops
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools.fuzz import cases, lengths

SHRINK_CALLS = 150  # evaluations spent shrinking a finding, at most (counted, so a run stays deterministic)

# --- judging one case -------------------------------------------------------------------------


def _fill_reached(kwargs):
    """Whether an additive mask of -1e9 ("large_negative") meets scaled scores of 1e8 or more: there the
    fill stops hiding keys (in bfloat16, s - 1e9 rounds in steps of 4e6), a limit of that convention."""
    if kwargs.get("fill") != "large_negative" or kwargs.get("api") != "additive":
        return False
    x, w_query, w_key = (np.asarray(kwargs[n], dtype=np.float64) for n in ("x", "w_query", "w_key"))
    largest = np.abs(x).max(initial=0.0) ** 2 * (np.abs(w_query).sum(axis=0) * np.abs(w_key).sum(axis=0)).sum()
    return largest / np.sqrt(w_query.shape[-1]) >= 1e8


def _float64(kwargs):
    """The inputs as the reference takes them: float arrays in float64, exactly; the rest as given."""
    return {
        n: np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) and v.dtype.kind not in "biu" else v
        for n, v in kwargs.items()
    }


@dataclasses.dataclass
class Share:
    """One op's part of a run: the cases drawn for it (its budget), the distinct ones, the outputs judged, and the
    outputs excused, by reason."""

    drawn: int = 0
    long: int = 0  # of the drawn, those at a model's own lengths (tools/fuzz/lengths.py)
    cases: int = 0
    judged: int = 0
    at_declared: int = 0  # of the judged, those that passed at the precision their declaration names
    excused: collections.Counter = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass
class Finding:
    op: str
    inputs: dict
    dtype: str
    outputs: dict  # output -> Verdict (or None when the output is a shape or type mismatch)
    messages: dict  # output -> one line
    raised: str = None
    side: dict = None  # the side of a split its expectation was computed on (a declared convention's), or None

    @property
    def failing(self):
        return sorted(self.messages)


class Fuzzer:
    def __init__(self, name, adapter, dtype, ops=None, divergences_as=None):

        self.name, self.adapter, self.dtype = name, adapter, dtype
        self.model = tolerance_model.model()
        self.spec = loader.load()
        self.report_name = divergences_as or name
        self.divergences = divergences.declared(self.report_name, adapter)
        not_applicable = getattr(adapter, "NOT_APPLICABLE", {})
        self.ops = [op for op in (ops or cases.COVERED) if hasattr(adapter, op) and op not in not_applicable]
        primary = adapter.DTYPES[0]
        self.planned = {
            (case.id, output)
            for case in self.spec.cases.values()
            for output, exp in case.expect.items()
            if plan.applies(self.spec, case, exp, dtype, primary)
        }  # the spec's dtype plan, case by case
        self.by_op = {}  # op -> its Share of the run, said op by op; the run's totals are their sums
        self.margin = 0.0  # the last case's worst margin: what a targeted search pushes up
        self.worst = None  # (margin, "op/output", the verdict's words): the closest a passing case came
        self.declared_worst = (0.0, 0, None)  # (largest margin, outputs, where) passed at a declared precision

    def excuse(self, op, inputs, output):
        """Why this output of this generated case is not judged, or None."""
        undeclared = plan.undeclared(self.adapter, op, self.dtype)
        if undeclared:
            return undeclared
        stands_with = generated.twins(self.spec, op, inputs)
        if not any((case.id, output) in self.planned for case in stands_with):  # the cases it stands with decide
            return f"the spec does not check {op}/{output} in {self.dtype} on cases like this one"
        declaring = generated.declaring(self.spec, op, inputs)
        reason = generated.not_applicable(self.adapter, declaring, op, inputs, self.dtype, output)
        if reason:
            return f"not applicable: {reason}"
        covered = self.covered(op, inputs, output)
        # A convention judged by its own expectations states facts of a spec case's outputs, never a drawn one's.
        excused = covered is not None and (covered.unbounded or covered.kind == "convention" and not covered.side)
        return f"known divergence: {covered}" if excused else None

    def side(self, op, inputs, output):
        """The side of a split a convention covering this output declares (verify.judged's), or None: the oracle's
        answers for it are computed there."""
        covered = self.covered(op, inputs, output)
        return covered.side if covered is not None and covered.kind == "convention" else None

    def covered(self, op, inputs, output):
        """The Divergence declared for this output of a generated case (generated.divergence), or None."""
        declaring = generated.declaring(self.spec, op, inputs)
        found = generated.divergence(self.report_name, self.divergences, declaring, op, self.dtype, output)
        return None if found is None else found[1]

    def arrays(self, inputs):
        from attention_conformance.cases.inputs import resolve_named

        with np.errstate(over="ignore"):  # a value beyond the dtype's range: evaluate() says so
            return {n: resolve_named(n, v, self.dtype, None) for n, v in inputs.items()}

    def expected(self, op, kwargs, side=None):
        """(exact, plain, derived) outputs of the reference on the inputs as the adapter received them:
        the exact answer, the plain computation's and the derived bound on a correct one's error, on `side`."""
        from attention_conformance.adapters import reference

        as64 = _float64(kwargs)
        names = ops.OPS[op][1]

        def outputs(result):
            return result if len(names) > 1 else {names[0]: result}

        with np.errstate(all="ignore"), sides.taking(side):
            exact = outputs(getattr(reference, op)(**as64))
            plain_dtype = np_dtype(tolerance_model.plain_dtype(self.dtype))
            with reference.rounding_to(plain_dtype):
                plain = outputs(getattr(reference, op)(**as64))
            plain = {  # beyond the dtype's range a stored result is inf, silently: the bound says Overflow
                k: np.asarray(v).astype(plain_dtype).astype(np.float64) if np.asarray(v).dtype.kind == "f" else v
                for k, v in plain.items()
            }
            return exact, plain, self.derived(op, kwargs)

    def derived(self, op, kwargs, dtype=None, sums_in_dtype=False):
        """{output: the derived bound} in `dtype` (default the run's) on the inputs as the adapter received them."""
        from attention_conformance.adapters import reference

        as64 = _float64(kwargs)
        names = ops.OPS[op][1]
        with np.errstate(all="ignore"):
            found = tolerance_model.bound(
                dtype or self.dtype, getattr(reference, op), sums_in_dtype=sums_in_dtype, **as64
            )
        return found if len(names) > 1 else {names[0]: found}

    def at_declared(self, op, kwargs, output, value, want, declared, side=None):
        """The Verdict of an output at the precision `declared` states (verify.judged's, for a generated case), on
        the `side` a convention covering it declares."""
        from attention_conformance.adapters import reference

        dtype = declared.judged_at(self.dtype)
        plain_dtype = np_dtype(tolerance_model.plain_dtype(dtype))
        names = ops.OPS[op][1]
        with sides.taking(side):
            derived = self.derived(op, kwargs, dtype, declared.sums_in_dtype)[output]
            with np.errstate(all="ignore"), reference.rounding_to(plain_dtype):
                plain = getattr(reference, op)(**_float64(kwargs))
        plain = np.asarray(plain[output] if len(names) > 1 else plain).astype(plain_dtype).astype(np.float64)
        nan = bool(side and side.get("fully_masked_rows") == "nan")
        return tolerance_model.judge(output, dtype, value, want, plain, derived, self.model[dtype], nan)

    @property
    def calls(self):
        """Distinct cases evaluated, every op's."""
        return sum(share.cases for share in self.by_op.values())

    @property
    def judged(self):
        """Outputs compared with the model: 0 means the run said nothing."""
        return sum(share.judged for share in self.by_op.values())

    @property
    def excused(self):
        """reason -> how many outputs it excused, every op's."""
        return sum((share.excused for share in self.by_op.values()), collections.Counter())

    def _excuse(self, op, reason, count=1):
        self.by_op.setdefault(op, Share()).excused[reason] += count

    def evaluate(self, op, inputs):
        """A Finding if the adapter's outputs break the tolerance model on this case, else None."""
        self.by_op.setdefault(op, Share()).cases += 1
        self.margin = 0.0
        names = ops.OPS[op][1]
        judged = []
        for o in names:
            reason = self.excuse(op, inputs, o)
            if reason:
                self._excuse(op, reason)
            else:
                judged.append(o)
        if not judged:
            return None
        kwargs = self.arrays(inputs)
        if _fill_reached(kwargs):
            reason = "logits near the -1e9 fill, where it no longer hides a key (the convention, not rounding)"
            self._excuse(op, reason, len(judged))
            return None
        if any(_beyond_range(n, v) for n, v in kwargs.items()):
            reason = f"an input beyond {self.dtype}'s range"  # drawn wide, it rounds to inf: no case to judge
            self._excuse(op, reason, len(judged))
            return None
        try:
            # A framework's warning (Keras on a softmax over one key) is not a raise, whatever filters the
            # caller set (pytest's turn warnings into errors): the reproducer, run alone, would not raise.
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = getattr(self.adapter, op)(**kwargs)
        except Exception as exc:  # noqa: BLE001 - an adapter that raises on valid inputs is a finding
            # Every line, joined: pydantic's and transformers' errors say what failed on the second line (a trial's
            # "Class validation error for validator 'validate_rope':" alone).
            text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())[:300]
            declared = [self.covered(op, inputs, o) for o in judged]  # asked only of a call that raised
            if all(d is not None and d.kind == "raises" and d.matches_raise(exc) for d in declared):
                self._excuse(op, f"raised as declared: {declared[0]}", len(judged))
                return None
            return Finding(
                op,
                inputs,
                self.dtype,
                {},
                {o: f"raised {type(exc).__name__}: {text}" for o in judged},
                f"{type(exc).__name__}: {text}",
            )
        got = result if len(names) > 1 else {names[0]: result}
        # The outputs a convention covers are judged on its side (one side per call: the draw's twins decide).
        side = next((s for s in (self.side(op, inputs, o) for o in judged) if s), None)
        try:
            exact, plain, derived = self.expected(op, kwargs, side)
        except tolerance_model.Overflow:  # the plain computation overflows: outside the model
            reason = f"a step beyond {self.dtype}'s range"
            self._excuse(op, reason, len(judged))
            return None
        nan = bool(side and side.get("fully_masked_rows") == "nan")
        k = self.model[self.dtype]
        verdicts, messages = {}, {}
        for output in list(judged):
            stand_in = np.asarray(plain.get(output, 0.0))
            if stand_in.dtype.kind == "f" and not np.isfinite(stand_in).all() and np.isfinite(exact[output]).all():
                # the dtype's range, not rounding: a correct computation overflows too (the model sweep skips these)
                reason = f"the plain {tolerance_model.plain_dtype(self.dtype)} computation overflows"
                self._excuse(op, reason)
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
            verdict = tolerance_model.judge(output, self.dtype, value, want, plain[output], derived[output], k, nan)
            verdicts[output] = verdict
            self.by_op.setdefault(op, Share()).judged += 1
            declared = generated.precision(
                self.report_name, self.divergences, generated.declaring(self.spec, op, inputs), op, self.dtype, output
            )
            if declared and not verdict.within:
                verdict = self.at_declared(op, kwargs, output, value, want, declared, side)
                limit, said = declared.within or 1.0, declared.said(self.dtype)
                if verdict.margin <= limit:
                    self.by_op[op].at_declared += 1
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
        return Finding(op, inputs, self.dtype, verdicts, messages, side=side) if messages else None

    def run(self, examples, seed, shrink=SHRINK_CALLS):
        """The shrunk Finding of a run of `examples` generated cases per op, or None. Each op is searched on its own,
        from the same seed: a drawn mix of 29 ops gave each about three cases (issue 58), and an op's search does
        not depend on which others are asked for."""
        for op in self.ops:
            parts = cases.shares(op)
            drawn = [
                (cases.strategy([op], words), min(max(cases.MIN_SHARE, -(-examples // len(parts))), examples), False)
                for words in parts  # an op with words: each word held in turn, the op's budget split between them
            ]
            if lengths.count(op, examples):  # then its long share, beside the budget
                drawn.append((lengths.strategy(op), lengths.count(op, examples), True))
            for strategy, share, long in drawn:
                self.by_op.setdefault(op, Share()).long += share if long else 0
                finding = self._run_op(op, strategy, share, seed, shrink)
                if finding is not None:
                    return finding
        return None

    def _run_op(self, op, strategy, examples, seed, shrink):
        from hypothesis import HealthCheck, Phase, configuration, errors, find, settings, target
        from hypothesis.internal.conjecture import engine

        self.by_op.setdefault(op, Share()).drawn += examples
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
                # Hypothesis stops shrinking after five minutes of wall time (engine.MAX_SHRINKING_SECONDS): on a
                # loaded machine the same seed gave another finding (issue 74). The shrink budget is counted
                # instead (SHRINK_CALLS), so a finding depends on the seed alone.
                wall_limit, engine.MAX_SHRINKING_SECONDS = engine.MAX_SHRINKING_SECONDS, math.inf
                try:
                    op, inputs = find(strategy, condition, settings=config, random=random.Random(seed))
                finally:
                    configuration.set_hypothesis_home_dir(previous)
                    engine.MAX_SHRINKING_SECONDS = wall_limit
        except errors.NoSuchExample:
            return None
        return self.evaluate(op, inputs)


def _beyond_range(name, value):
    """A drawn float input that rounds to inf or NaN in the dtype; a sink of -inf is a head without one."""
    if not (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
        return False
    finite = np.isfinite(value) | (np.isneginf(value) if ops.PARAMETERS.get(name) == "sink" else False)
    return not np.all(finite)
