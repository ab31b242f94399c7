"""A generated case (fuzz's, the model sweep's) against the repository's spec: the spec cases it stands with
are those of its op sharing its deciding features, and what an adapter declares about them (NOT_APPLICABLE,
a known divergence) covers it; a bounded divergence excuses nothing."""

import types

import numpy as np
import pytest

from attention_conformance.cases import divergences, generated, loader
from attention_conformance.contract import ids

SPEC = loader.load()
ROWS = np.zeros((3, 3), dtype=bool)
X_W = {"x": np.ones((3, 4)), "w_query": np.ones((4, 2)), "w_key": np.ones((4, 2)), "w_value": np.ones((4, 2))}


def _masked(fully_masked_row):
    mask = ROWS.copy()
    mask[1, :] = fully_masked_row
    mask[2, 0] = True
    return X_W | {"mask": mask}


def _twins(op, given):
    return [case.id for case in generated.twins(SPEC, op, given)]


def test_shape_reads_a_drawn_a_listed_and_a_golden_tensor():
    assert generated.shape({"uniform": [-1, 1], "shape": [2, 5], "seed": 1}) == (2, 5)
    assert generated.shape([[1.0, 2.0, 3.0]]) == (1, 3) and generated.shape(np.ones((4, 2))) == (4, 2)
    assert generated.shape("doc000_seed123.json#x") == () and generated.shape(None) == ()


def test_features_are_the_words_switches_and_shapes_that_decide():
    assert generated.features("masked_attention", _masked(True)) == {
        "fully_masked": True,
        "one_token": False,
        "one_query": False,
    }
    assert generated.features("decode_attention", X_W | {"start": 2})["offset"] is True
    bool_mask = X_W | {"mask": ROWS, "api": "bool", "fill": "neg_inf"}
    assert "fill" not in generated.features("mask_conventions", bool_mask)  # a boolean mask reads no fill
    assert generated.features("mask_conventions", bool_mask | {"api": "additive"})["fill"] == "neg_inf"


def test_a_fully_masked_row_stands_with_the_specs_fully_masked_cases_only():
    assert _twins("masked_attention", _masked(True)) == ["padding_fully_masked"]
    assert _twins("masked_attention", _masked(False)) == ["padding_partial"]


def test_a_row_of_256_scores_stands_with_the_long_row_case():
    assert _twins("softmax", {"scores": np.ones((2, 256))}) == ["softmax_long_row"]  # a bfloat16 sum stalls there


def test_a_short_row_never_stands_with_the_long_row_case():
    """The spec's short rows are golden (no shape to read): a generated short row must not fall back to every softmax
    case and take softmax_long_row's MLX bfloat16 divergence (a sum that stops at 256 terms) as its own."""
    twins = [case.id for case in generated.twins(SPEC, "softmax", {"scores": np.ones((2, 3))})]
    assert twins and "softmax_long_row" not in twins, twins
    mlx = divergences.declared("mlx", types.SimpleNamespace())
    stands_with = generated.twins(SPEC, "softmax", {"scores": np.ones((2, 3))})
    found = generated.divergence("mlx", mlx, stands_with, "softmax", "bfloat16", "weights")
    assert found is None or found[0] != "softmax_long_row", found


def test_a_one_token_spec_case_speaks_for_one_token_cases_only():
    gqa = {"num_heads": 2, "num_kv_heads": 2, "causal": True}
    one = _twins("grouped_fused_attention", X_W | gqa | {"x": np.ones((1, 4))})
    many = _twins("grouped_fused_attention", X_W | gqa)
    assert one == ["gqa_grouped_fused", "gqa_grouped_fused_one_token"] and many == ["gqa_grouped_fused"]


def test_with_no_spec_case_sharing_every_feature_the_last_are_let_go():
    # An averaged-weights layer with T = N = E: the spec has no such cube, so the averaged cases stand for it.
    cube = X_W | {"x": np.ones((2, 2)), "num_heads": 2, "layer": "mha_averaged", "causal": True}
    assert _twins("attention_module", cube) == ["layer_mha_averaged"]


@pytest.mark.parametrize(
    ("key", "covers"),
    [("padding_fully_masked", True), ("padding_fully_masked/weights", True), ("padding_fully_masked/context", False)]
    + [("masked_attention/weights", True), ("padding_partial", False), ("float16", False), ("float32", True)],
)
def test_a_not_applicable_key_naming_a_twin_covers_the_generated_case(key, covers):
    adapter = types.SimpleNamespace(NOT_APPLICABLE={key: "cannot"})
    stands_with = generated.twins(SPEC, "masked_attention", _masked(True))
    found = generated.not_applicable(adapter, stands_with, "masked_attention", _masked(True), "float32", "weights")
    assert found == ("cannot" if covers else None)


def test_a_known_divergence_of_a_twin_or_of_fuzz_op_covers_it():
    stands_with = generated.twins(SPEC, "masked_attention", _masked(True))

    def excused(pattern, reason):
        return generated.divergence("nan", {pattern: reason}, stands_with, "masked_attention", "float32", "weights")

    nans = divergences.Divergence("NaN for a fully masked row", "convention")
    assert excused("test_weights[nan-*-padding_fully_masked]", nans) == ("padding_fully_masked", nans)
    generated_case = ids.generated_case("masked_attention")
    assert excused(f"test_*[nan-float32-{generated_case}]", nans) == (generated_case, nans)
    assert excused("test_weights[nan-*-padding_partial]", nans) is None  # not the case it stands with
    assert excused("test_weights[other-*-padding_fully_masked]", nans) is None  # another adapter's
    measured = divergences.Divergence("measured", "precision")
    assert excused(f"test_weights[nan-float32-{generated_case}]", measured) == (generated_case, measured)
    assert measured.bounded and not nans.bounded  # fuzz still judges the first (tests/cases/test_divergences.py)


def test_a_rotary_draw_stands_with_the_spec_cases_of_its_pairing_only():
    """An outside trial declared rope_interleaved (transformers' interleaved RoPE returns the pairs de-interleaved) and
    fuzz excused every rotary_embedding draw, rotate_half's too."""
    drawn = {"x": np.ones((2, 6, 8)), "rotary_dim": 8, "theta": 10000.0, "position": 0}
    half, interleaved = (_twins("rotary_embedding", drawn | {"pairing": p}) for p in ("rotate_half", "interleaved"))
    assert half and interleaved and not set(half) & set(interleaved)
    assert "rope_interleaved" in interleaved and "rope_rotate_half" in half


def _own_words(case):
    mine = generated.features(case.op, case.inputs)
    return {f: v for f, v in mine.items() if f in case.inputs and f not in generated.DECIDING.get(case.op, ())}


@pytest.mark.parametrize("op", sorted({case.op for case in SPEC.cases.values() if _own_words(case)}))
def test_a_spec_case_declares_for_the_draws_with_its_own_words_only(op):
    """A draw equal to a spec case's inputs is covered by what that case declares, and by no case whose words or
    switches differ from it (a causal draw by no non-causal case's declaration), one-query cases standing in for a
    one-query draw aside."""
    for case in (c for c in SPEC.cases.values() if c.op == op):
        declaring = generated.declaring(SPEC, op, case.inputs)
        assert case in declaring
        one_query = generated.features(op, case.inputs).get("one_query")
        for other in declaring:
            if one_query and generated.features(op, other.inputs).get("one_query"):
                continue
            theirs = generated.features(op, other.inputs)
            assert {f: theirs.get(f, False) for f in _own_words(case)} == _own_words(case), (case.id, other.id)


@pytest.mark.parametrize(
    ("op", "declared"), [("alibi_attention", "alibi_three_heads"), ("alibi_flag", "alibi_flag_three_heads")]
)
def test_declaring_the_non_causal_alibi_cases_leaves_the_causal_draws_judged(op, declared):
    """Issue 74: flash-attention's ALiBi (symmetric without a causal mask) declared on the two non-causal cases
    excused all 75 drawn ALiBi outputs, the causal ones too: a causal-ALiBi bug passed fuzz."""
    symmetric = divergences.Divergence("symmetric ALiBi without a causal mask", "convention")
    drawn = dict(SPEC.cases[declared].inputs)

    def covered(causal):
        given = drawn | {"causal": causal}
        return generated.divergence(
            "flash",
            {f"test_*[flash-*-{declared}]": symmetric},
            generated.declaring(SPEC, op, given),
            op,
            "float16",
            "context",
        )

    assert covered(False) == (declared, symmetric)
    assert covered(True) is None
    assert declared in _twins(op, drawn | {"causal": True})  # the spec still checks the draw: it is judged


def test_a_one_query_case_declares_for_every_one_query_draw_of_its_op_whatever_its_words():
    """XLA's one-query bfloat16 dot, declared on qk_norm_flag_one_query (per-head norms), raised on a whole-projection
    one-query draw too: the first fresh-clone CI of the word rule found it (jax's fuzz budget, seed 0)."""
    drawn = dict(SPEC.cases["qk_norm_flag_one_query"].inputs) | {"per_head": False}
    assert "qk_norm_flag_one_query" in [c.id for c in generated.declaring(SPEC, "qk_norm_flag", drawn)]


def test_a_chunked_draw_stands_with_the_padded_or_the_unpadded_spec_cases():
    """An outside trial's mlx-lm adapter declared the left-padded chunked cases not applicable (its chunk mask has no
    padded batch) and fuzz excused every chunked_flag draw, the unpadded ones too."""
    drawn = X_W | {"x": np.ones((2, 8, 4)), "chunk": 3}
    unpadded = _twins("chunked_flag", drawn | {"padding": np.zeros((2, 8), dtype=bool)})
    padded = _twins("chunked_flag", drawn | {"padding": np.arange(8) < np.array([[0], [2]])})
    assert unpadded == ["chunked_flag_two_rows"], unpadded
    assert padded and "chunked_flag_two_rows" not in padded and "chunked_flag_left_padded" in padded
