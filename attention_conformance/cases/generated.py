"""A generated case (fuzz's, the model sweep's) against the spec: the spec cases it stands with, and the
NOT_APPLICABLE key or known divergence that covers it. One rule for every tool that generates cases:
a key or divergence naming a spec case covers the generated cases that case stands for (same op, same
deciding features: words and switches, a decoding offset or not, a fully masked row or not, ...) and, among
those, shares the most other words with (`declaring`); a divergence naming fuzz_<op> covers every generated case
of the op."""

import math

import numpy as np

from attention_conformance.cases import divergences, plan
from attention_conformance.contract import ids


def features(op, inputs):
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
        elif name in ("mask", "padding") and isinstance(value, (list, np.ndarray)):
            features["fully_masked"] = bool(np.asarray(value, dtype=bool).all(axis=-1).any())
            if name == "padding":  # a batch with padding or none (Llama 4's chunks: a library with no padded path)
                features["padded"] = bool(np.asarray(value, dtype=bool).any())
        elif name == "num_kv_heads":  # one K/V head shared by several query heads; one head alone is plain attention
            features["multi_query"] = value == 1 and inputs.get("num_heads", 1) > 1
        elif name == "softmax_scale":  # a scale float32 holds exactly: kernels that keep it in float32 lose nothing
            features["float32_scale"] = float(np.float32(value)) == float(value)
        elif name == "x" and len(shape(value)) >= 2:
            features["one_token"] = shape(value)[-2] == 1
        elif name == "cap" and isinstance(value, (int, float)):  # conventions.softcap: a cap of 0 is none
            features["capped"] = value != 0
        elif name == "sinks":  # conventions.sinks: a sink of -inf takes nothing, a head without one
            features["with_sinks"] = has_sinks(value)
    if "scores" in inputs and shape(inputs["scores"]):  # a bfloat16 sum stops growing at 2**8 terms
        features["long_row"] = shape(inputs["scores"])[-1] >= 256
    if len(shape(inputs.get("x"))) >= 2:  # one query row in all (B = T = N = 1): XLA:CPU's bfloat16 dot fails
        features["one_query"] = math.prod(shape(inputs["x"])[:-1]) * inputs.get("num_heads", 1) == 1
    if "num_heads" in inputs and len(shape(inputs.get("x"))) >= 2:  # T = N = E: Keras's layer is wrong there
        T, E = shape(inputs["x"])[-2:]
        features["cube_heads"] = T == inputs["num_heads"] == E > 1  # one of each: no axis to swap
    return features


def has_sinks(value):
    """Whether a drawn or spec `sinks` holds a sink that takes something: a number other than -inf."""
    if isinstance(value, dict):  # {uniform: [low, high], ...} is finite; {fill: -.inf, ...} is none
        return "fill" not in value or value["fill"] != -np.inf
    return bool((np.asarray(value, dtype=np.float64) != -np.inf).any())


def shape(value):
    """A drawn or spec tensor's shape: {uniform or fill, shape} or the values themselves."""
    if isinstance(value, dict):
        return tuple(value.get("shape", ()))
    return np.shape(value) if isinstance(value, (list, np.ndarray)) else ()


# The features that tell an op's spec cases apart where an adapter's NOT_APPLICABLE key or known
# divergence names one of them; an op not listed: every spec case of the op stands for every generated one.
DECIDING = {
    "attention_module": ("layer", "cube_heads"),
    "decode_attention": ("offset",),
    "causal_flag": ("offset",),
    "softmax": ("long_row",),
    "masked_attention": ("fully_masked",),
    "fused_attention": ("one_query",),
    "scale_flag": ("one_query", "float32_scale"),
    "key_padding_flag": ("one_query",),
    "alibi_flag": ("one_query",),
    "band_flag": ("one_query",),
    "query_padding_flag": ("one_query",),
    # mlx-lm's chunk mask has no left-padded batch (an outside trial's): declared on the padded cases, it leaves the
    # unpadded draws judged.
    **{op: ("padded",) for op in ("chunked_attention", "chunked_flag")},
    # XLA's one-query bfloat16 dot, declared on the per-head case, holds for a whole-projection draw too.
    "qk_norm_flag": ("one_query",),
    # A memory all padding (conventions.fully_masked_rows) declared for a textbook's NaN excuses only such draws.
    "cross_attention": ("fully_masked",),
    "cross_attention_flag": ("fully_masked", "one_query"),
    # A pairing declared on its spec cases (a library whose interleaved RoPE returns the pairs de-interleaved) leaves
    # the other pairing's draws judged.
    **{op: ("pairing",) for op in ("rotary_embedding", "fused_rotary", "rotary_attention")},
    "mask_conventions": ("api", "fill", "fully_masked", "one_query"),
    "layer_mask": ("fully_masked", "cube_heads", "one_query"),
    "layer_key_padding": ("fully_masked", "cube_heads"),
    # A decoder case names the families it switches on together: one declared for its cap and sinks at once (an
    # eager function that takes one or the other) excuses the drawn cases with both, not the capped ones alone.
    "decoder_attention": ("capped", "with_sinks"),
    **{
        op: ("multi_query", "one_token")
        for op in ("grouped_attention", "grouped_fused_attention", "grouped_attention_layer")
    },
    # Keras's fused op refuses one K/V head, XLA's bfloat16 dot one query row: declared on those cases, each leaves the
    # other draws judged.
    **{op: ("multi_query", "one_query") for op in ("decode_paths", "sink_decode_paths")},
}


# A spec case on one token (one query) speaks for such generated cases only; the others for those too.
_NARROWING = ("one_token", "one_query")


def twins(spec, op, inputs):
    """The spec cases a generated case of `op` stands with: same op, same deciding features. Where no
    spec case has them all, the last are let go one by one (a generated averaged-weights cube stands
    with the averaged-weights cases, the spec having no such cube). A one-query (one-token) case also stands with the
    spec's one-query cases of the op, found the same way among them: jax's one-query bfloat16 failure, declared on a
    boolean mask's case, holds for an additive mask's draw too. Whether the spec checks an output in a dtype is read
    from these; what a declaration covers, from `declaring`."""
    return _stands_with(spec, op, inputs, alike=False)


def declaring(spec, op, inputs):
    """The spec cases whose NOT_APPLICABLE keys and known divergences cover a generated case: of its twins, those
    sharing the most of its own words and switches beside the deciding ones (`causal`, `per_head`, ...). A declaration
    on the spec's non-causal ALiBi cases covers the non-causal draws, not the causal ones the spec has cases of too
    (issue 74: two declared non-causal cases excused all 75 ALiBi draws). The one-query cases a one-query draw also
    stands with keep covering it whatever its words: what they declare is that trait's."""
    return _stands_with(spec, op, inputs, alike=True)


def _stands_with(spec, op, inputs, alike):
    deciding = DECIDING.get(op, ())
    mine = features(op, inputs)
    cases = [(c, features(op, c.inputs)) for c in spec.cases.values() if c.op == op]
    words = [f for f in mine if f in inputs and f not in deciding] if alike else []

    # A feature a case cannot show (scores given as a golden reference: no shape to read) is read as absent, so
    # false: the spec's short softmax rows are golden, and must not leave a generated short row to stand with
    # softmax_long_row alone (and take its divergence) when the deciding features are let go.
    def same(theirs, f):
        return theirs.get(f, False) == mine.get(f, False) or (f in _NARROWING and not theirs.get(f))

    def closest(among, words=()):
        for n in range(len(deciding), -1, -1):
            found = [(c, theirs) for c, theirs in among if all(same(theirs, f) for f in deciding[:n])]
            if found:
                most = max(sum(same(theirs, f) for f in words) for _, theirs in found)
                return [c for c, theirs in found if sum(same(theirs, f) for f in words) == most]
        return []

    found = closest(cases, words)
    narrow = [f for f in deciding if f in _NARROWING and mine.get(f)]
    if narrow:
        found += [c for c in closest([(c, t) for c, t in cases if all(t.get(f) for f in narrow)]) if c not in found]
    return found


def not_applicable(adapter, stands_with, op, inputs, dtype, output):
    """The adapter's NOT_APPLICABLE reason covering this output of a generated case, or None: its keys
    are read as for the spec cases it stands with (their ids), its op, dtype and input values."""
    reasons = getattr(adapter, "NOT_APPLICABLE", {})
    keys = plan.keys_of(op, [twin.id for twin in stands_with], inputs, dtype, output)
    return next((reasons[k] for k in keys if k in reasons), None)


def divergence(name, declared, stands_with, op, dtype, output):
    """(case id, Divergence) declared for this output of a generated case, or None: one declared for a spec case it
    stands with, or for fuzz_<op>. Only a convention or a bug excuses it (any result); a precision still holds the
    results to its own bound, and a declared raise excuses that raise alone (verify.judged says the same of a run)."""
    for case_id in [twin.id for twin in stands_with] + [ids.generated_case(op)]:
        found = divergences.reason_for(ids.test_id(output, name, dtype, case_id), declared)
        if found is not None:
            return case_id, found
    return None


def precision(name, declared, stands_with, op, dtype, output):
    """The precision declared for this output of a generated case (a twin's or fuzz_<op>'s), or None: it judges the
    numbers where a raise declared beside it excuses only that raise."""
    for case_id in [twin.id for twin in stands_with] + [ids.generated_case(op)]:
        for found in divergences.covering(ids.test_id(output, name, dtype, case_id), declared):
            if found.kind == "precision":
                return found
    return None
