"""Calling an adapter: one call per case and dtype, its outputs kept while the case's tests run, the
oracle's answers read from its disk cache, and the time the framework itself spent counted."""

import collections
import time

import numpy as np

from attention_conformance.cases import fields, inputs, plan
from attention_conformance.contract.ops import OPS
from attention_conformance.margin import Nonconformance
from attention_conformance.run import oracle_cache, progress


class AdapterRaised(Nonconformance):
    """An adapter's function raised: reported as that case's result, with the case named and the
    adapter's own exception chained (its traceback is what the author needs)."""

    def __init__(self, message=""):
        super().__init__(message, worst={"raised": True})  # root_cause says it apart from a comparison that failed


# (adapter, case id, dtype, ...) -> outputs: every output of a case shares one call. Bounded:
# pytest runs a case's tests together (conftest sorts them), and a GPT-2-sized case's outputs in
# four dtypes would otherwise stay in memory for the whole session.
_outputs = collections.OrderedDict()
_KEEP = 8

# Seconds spent inside the adapter's own functions, per (op, dtype), for outputs under test only (the
# oracle's time is the suite's): the framework's floor, which the benchmark tells apart from the suite's
# overhead. An adapter that raises has its time counted too; it was the framework computing.
inside_s, inside_calls = collections.Counter(), collections.Counter()
inside_cpu_s = [0.0]  # the process's CPU seconds (every thread) in those calls: what parallel runs share


# (case, dtype, goldens) -> (the case, inputs, {name: (array, digest)}): the inputs the oracle's three answers for
# a case (exact, rounded at every step, bound) are computed on, resolved and hashed for their cache key once, not
# once per answer (issue 43: 597 resolutions for 277 adapter calls). Read-only, so no answer changes the next one's.
# The case is held so that its id() keys nothing else.
_oracle_inputs = collections.OrderedDict()


def forget():
    """Drop the outputs kept in memory: for a caller that changes an adapter under the same name."""
    _outputs.clear()
    _oracle_inputs.clear()


def _resolved_for_oracle(case, dtype, goldens):
    key = (id(case), dtype, id(goldens))
    if key not in _oracle_inputs or _oracle_inputs[key][0] is not case:
        kwargs = inputs.resolve_all(case, dtype, goldens)
        arrays = {name: value for name, value in kwargs.items() if isinstance(value, np.ndarray)}
        for value in arrays.values():
            value.flags.writeable = False
        digests = {name: (value, oracle_cache.array_digest(value)) for name, value in arrays.items()}
        _oracle_inputs[key] = (case, goldens, kwargs, digests)
        while len(_oracle_inputs) > 2:
            _oracle_inputs.popitem(last=False)
    _oracle_inputs.move_to_end(key)
    return _oracle_inputs[key][2:]


def outputs(adapter_name, adapter, case, dtype, goldens, input_dtype=None, rounding=None, oracle=False):
    """The adapter's outputs for a case; input_dtype lets the reference run on the tested inputs,
    and `rounding` keys the reference's rounded-at-every-step run apart from its exact one.
    The `oracle`'s answer (never an output under test) comes from its disk cache."""
    key = (adapter_name, case.id, dtype, input_dtype, rounding, id(goldens), oracle)
    if key not in _outputs:
        if oracle:
            kwargs, digests = _resolved_for_oracle(case, input_dtype or dtype, goldens)
        else:  # the adapter's own copy, whatever it does to it
            kwargs = inputs.resolve_all(case, input_dtype or dtype, goldens)

        def call():
            started, cpu = time.perf_counter(), time.process_time()
            try:
                result = getattr(adapter, case.op)(**kwargs)
            except Exception as exc:
                text = (str(exc).strip().splitlines() or [""])[0]
                said = (
                    f"{adapter_name} {input_dtype or dtype}, case {case.id!r}: {case.op}() raised {type(exc).__name__}"
                    + (f": {text}" if text else "")
                )
                if oracle:  # the oracle's failure is the suite's, never the adapter under test's
                    raise RuntimeError(
                        f"{said} (the oracle: a bug in attention-conformance, please report it)"
                    ) from exc
                raise AdapterRaised(said) from exc
            finally:
                if not oracle:
                    inside_s[case.op, input_dtype or dtype] += time.perf_counter() - started
                    inside_calls[case.op, input_dtype or dtype] += 1
                    inside_cpu_s[0] += time.process_time() - cpu
            names = OPS[case.op][1]
            if len(names) == 1:
                return {names[0]: result}
            # An output the adapter declares not applicable ("attention_module/weights") may be left out.
            required = {n for n in names if not plan.not_applicable(adapter, case, input_dtype or dtype, n)}
            if not isinstance(result, dict) or not required <= set(result) <= set(names):
                got = sorted(result) if isinstance(result, dict) else type(result).__name__
                raise Nonconformance(
                    f"{adapter_name} {case.op}() returned {got}, should return a dict with {sorted(names)}"
                    + (
                        f" (or without {sorted(set(names) - required)}, declared not applicable)"
                        if required != set(names)
                        else ""
                    )
                )
            return result

        keep = tuple(sorted(case.expect))  # the oracle's answer holds only the outputs the case has expectations for
        if oracle:
            # Inputs the oracle says do not change its answer are left out of the key: cases that differ
            # only in them (a checkpoint's layout, which layer holds the weights) share one cache entry.
            deciding = getattr(adapter, "deciding_inputs", lambda op, given: given)(case.op, kwargs)
            computed = []

            def compute():
                computed.append(True)
                return call()

            result = oracle_cache.cached(
                case.op, deciding, rounding, oracle_cache.sources(adapter), compute, keep, digests
            )
            progress.asked_for(case.id, input_dtype or dtype, bool(computed))
        else:  # nor does an output under test stay in memory beyond what its expectations read
            compared = {
                getattr(exp, f.name) for exp in case.expect.values() for f in fields.FIELDS.values() if f.other_output
            }
            result = {name: value for name, value in call().items() if name in keep or name in compared}
            result = {name: result.get(name) for name in keep} | result  # a declared-absent output is never read
        _outputs[key] = result
        while len(_outputs) > _KEEP:
            _outputs.popitem(last=False)
    _outputs.move_to_end(key)
    return _outputs[key]
