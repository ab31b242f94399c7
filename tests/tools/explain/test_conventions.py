"""The conventions `explain` tries past the documents (attention_conformance/tools/conventions.py), here the
packed documents': a row cut at cu_seqlens judged within, and the documents seeing each other, or RoPE's positions
running on across the row, each named."""

import numpy as np
import pytest
from explained import explained

from attention_conformance.adapters import reference
from attention_conformance.tools.explain import conventions, forms

CUTS = np.array([0, 4, 5, 9])


def _packed(restart=True, across=False):
    """q, k, v [1, 2, 9, 8] before RoPE, and (q turned, out) of causal attention within each document, float64."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.uniform(-1, 1, (1, 2, 9, 8)) for _ in range(3))
    places = np.arange(9) - CUTS[np.repeat(np.arange(3), np.diff(CUTS))] if restart else np.arange(9)
    cos, sin = reference.rotary._cos_sin(places, 8, 10000.0, "none", 1.0, q)
    q_turned, k_turned = (reference.rotary._rotated(t, cos, sin, "rotate_half", 8) for t in (q, k))
    document = np.repeat(np.arange(3), np.diff(CUTS))
    hidden = np.triu(np.ones((9, 9), bool), 1) | (False if across else document[:, None] != document[None, :])
    scores = np.where(hidden, -np.inf, q_turned @ np.swapaxes(k_turned, -1, -2) / np.sqrt(8))
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    out = weights / weights.sum(-1, keepdims=True) @ v
    return dict(q=q, k=k, v=v, cu_seqlens=CUTS, causal=np.array(True), pairing=np.array("rotate_half")), q_turned, out


def test_a_packed_row_is_judged_within_its_documents(tmp_path):
    given, q_turned, out = _packed()
    code, text = explained(tmp_path, **given, q_rotated=q_turned, out=out)
    assert code == 0 and "3 packed documents" in text and "their places in their documents" in text, text


@pytest.mark.parametrize(
    "wrong, named",
    [
        (dict(across=True), "the packed documents attending to each other"),
        (dict(restart=False), "RoPE positions running on across the packed row"),
    ],
)
def test_each_packed_documents_mistake_is_named(tmp_path, wrong, named):
    given, q_turned, out = _packed(**wrong)
    code, text = explained(tmp_path, **given, q_rotated=q_turned, out=out)
    assert code == 1 and f"matches a known difference: {named}" in text, text


def test_cuts_that_do_not_end_at_the_row_are_refused_naming_cu_seqlens(tmp_path):
    given, _, out = _packed()
    with pytest.raises(forms.BadInput, match="'cu_seqlens' int64 \\[3\\]: 0, then each document's end"):
        explained(tmp_path, **(given | dict(cu_seqlens=np.array([0, 4, 8]))), out=out)


def test_without_packed_documents_none_of_their_conventions_is_tried():
    problem = type(
        "P", (), dict(documents=None, window=None, chunk=None, cap=None, bias=None, sinks=None, pairing=None)
    )()
    assert conventions.past_the_documents(problem) == []


def test_a_packed_row_given_as_position_ids_and_a_mask_turns_its_keys_at_them_too(tmp_path):
    """transformers' way (the trial's): restarting position_ids and a document mask, no cu_seqlens; where T == S each
    key is turned at its own token's position_ids, as apply_rotary_pos_emb turns q and k alike."""
    given, q_turned, out = _packed()
    cos, sin = reference.rotary._cos_sin(np.arange(9), 8, 10000.0, "none", 1.0, given["q"])
    document = np.repeat(np.arange(3), np.diff(CUTS))
    places = np.arange(9) - CUTS[document]
    as_transformers = {k: v for k, v in given.items() if k != "cu_seqlens"} | dict(
        cos=cos, sin=sin, position_ids=places, mask=document[:, None] != document[None, :]
    )
    code, text = explained(tmp_path, **as_transformers, q_rotated=q_turned, out=out)
    assert code == 0 and "rounding, not a bug" in text, text


def test_keys_turned_at_zero_where_the_queries_take_position_ids_is_named(tmp_path):
    """T == S: the keys at the queries' position_ids; a kernel that turned them at 0..S-1 is named, not just beyond."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.uniform(-1, 1, (1, 1, 4, 8)) for _ in range(3))
    cos, sin = reference.rotary._cos_sin(np.arange(9), 8, 10000.0, "none", 1.0, q)
    ids = np.arange(5, 9)
    q_turned = reference.rotary._rotated(q, cos[ids], sin[ids], "rotate_half", 8)
    k_turned = reference.rotary._rotated(k, cos[:4], sin[:4], "rotate_half", 8)
    scores = q_turned @ np.swapaxes(k_turned, -1, -2) / np.sqrt(8)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    out = weights / weights.sum(-1, keepdims=True) @ v
    given = dict(q=q, k=k, v=v, pairing=np.array("rotate_half"), cos=cos, sin=sin, position_ids=ids)
    code, text = explained(tmp_path, **given, out=out)
    assert code == 1 and "matches a known difference: RoPE keys turned at 0..S-1" in text, text
