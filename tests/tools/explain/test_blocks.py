"""explain at a model's own sizes (tools/explain/blocks.py): a block of query rows at a time, the same verdict as the
whole; `--rows` judging a sample that holds the tile boundaries; a progress line; too large refused in one line."""

import numpy as np
import pytest
from explained import causal_arrays as _causal
from explained import explained

from attention_conformance.tools.explain import blocks, command, forms, problem


def _whole_and_streamed(tmp_path, monkeypatch, arrays, block_scores):
    np.savez(tmp_path / "case.npz", **arrays)
    p = problem.Problem(tmp_path / "case.npz", problem.load(tmp_path / "case.npz"))
    whole = (p.compute(), p.compute(rounding="float32"), p.bound())
    monkeypatch.setattr(blocks, "BLOCK_SCORES", block_scores)
    p = problem.Problem(tmp_path / "case.npz", problem.load(tmp_path / "case.npz"))
    return p, whole, blocks.stream(p, np.arange(p.T), err=lambda line: None)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        dict(
            pairing=np.array("rotate_half"),
            sinks=np.linspace(-1, 1, 4),
            softcap=np.array(5.0),
            q_rotated=np.zeros((1, 4, 24, 16), np.float32),
        ),
        dict(norm_weight_q=np.linspace(0.5, 1.5, 16), norm_weight_k=np.linspace(1.5, 0.5, 16), window=np.array(5)),
    ],
    ids=["causal", "rope-sinks-cap", "norm-window"],
)
def test_a_block_at_a_time_gives_the_whole_answer_and_bound(tmp_path, monkeypatch, extra):
    arrays = _causal(24, 40, 4, 2, 16) | extra
    p, whole, streamed = _whole_and_streamed(tmp_path, monkeypatch, arrays, block_scores=2 * 40)
    assert blocks.rows_per_block(p, 0) == 1  # every row its own block, each K/V head its own
    for name in ("out",) + (("q_rotated",) if "pairing" in extra else ()):
        _same(whole, streamed, name)


def _same(whole, streamed, name):
    """The plain answer and the bound the same bytes; the oracle's within its own accuracy (deterministic.matmul:
    K 2**-58 of the row's largest magnitude, which a block's seen keys may lower), far below any allowance."""
    (exact, plain, derived), (s_exact, s_plain, s_derived) = whole, streamed
    assert np.array_equal(s_plain[name], plain[name]) and np.array_equal(s_derived[name], derived[name]), name
    row = np.abs(exact[name]).max(axis=-1, keepdims=True)
    assert (np.abs(s_exact[name] - exact[name]) <= 2.0**-48 * row).all(), name


def test_a_bias_and_a_mask_with_heads_are_cut_with_their_heads(tmp_path, monkeypatch):
    arrays = _causal(8, 12, 4, 2, 8, seed=3)
    rng = np.random.default_rng(1)
    arrays |= dict(bias=rng.standard_normal((1, 4, 8, 12)), mask=rng.random((1, 4, 1, 12)) < 0.2)
    arrays.pop("out")
    arrays["out"] = np.zeros((1, 4, 8, 8), np.float32)
    _, whole, streamed = _whole_and_streamed(tmp_path, monkeypatch, arrays, block_scores=12 * 3)
    _same(whole, streamed, "out")


def test_past_the_whole_a_streamed_file_gets_the_verdict_of_the_whole(tmp_path, monkeypatch):
    arrays = _causal(48, 48, 4, 2, 16, seed=5)
    code, whole = explained(tmp_path, **arrays)
    monkeypatch.setattr(forms, "STREAM_FROM", 0)
    monkeypatch.setattr(blocks, "BLOCK_SCORES", 2 * 48 * 5)
    streamed_code, streamed = explained(tmp_path, **arrays)
    assert code == streamed_code == 0
    assert whole.splitlines()[-1] == streamed.splitlines()[-1], (whole, streamed)


def test_rows_holds_the_first_the_last_and_each_tile_boundary():
    rows = blocks.chosen(300, 5, seed=1)
    assert {0, 63, 64, 127, 128, 191, 192, 255, 256, 299} <= set(rows.tolist())
    assert rows.size == 10 + 5 and np.array_equal(rows, np.unique(rows))
    assert np.array_equal(rows, blocks.chosen(300, 5, seed=1)) and not np.array_equal(rows, blocks.chosen(300, 5, 2))
    assert blocks.chosen(3, 10, seed=0).tolist() == [0, 1, 2]


def test_rows_finds_a_kernel_wrong_from_row_96_and_says_how_many_rows_it_judged(tmp_path):
    arrays = _causal(200, 200, 2, 1, 8, seed=2)
    good = explained(tmp_path, **arrays)
    arrays["out"][:, :, 96:] *= np.float32(1.001)
    path = tmp_path / "wrong.npz"
    np.savez(path, **arrays)
    lines, record = [], {}
    code = command.explain(path, out=lines.append, err=lines.append, record=record, rows=0)
    text = "\n".join(lines)
    assert good[0] == 0 and code == 1, text
    assert "judged 8 of 200 query rows (--rows 0, seed 0)" in text and "on the 8 of 200 query rows judged" in text, text
    assert record["rows_judged"] == 8 and record["stages"][0]["worst"]["index"][2] in (127, 128, 191, 192, 199)
    assert record["rows"] == [0, 63, 64, 127, 128, 191, 192, 199]


def test_a_long_computation_says_how_far_it_is(monkeypatch):
    ticks = iter(range(0, 1000, 3))
    said = []
    progress = blocks.Said(4, said.append, clock=lambda: next(ticks))
    for _ in range(4):
        progress.rows(1, "the oracle")
    assert said == [
        "explain: 50% of the float64 work done (the oracle now), 6 s",
        "explain: 100% of the float64 work done (the oracle now), 12 s",
    ]


def test_too_large_for_this_machine_is_refused_in_one_line_naming_the_size(tmp_path, monkeypatch):
    monkeypatch.setattr(forms, "_free_bytes", lambda: 1000)
    with pytest.raises(forms.BadInput, match=r"GiB in float64, and this machine has 0.0 GiB free: save fewer heads"):
        explained(tmp_path, **_causal(8, 8, 2, 1, 8))


def test_a_scores_stage_past_the_whole_is_refused_not_streamed(tmp_path, monkeypatch):
    monkeypatch.setattr(problem, "MAX_SCORES", 8)
    arrays = dict(q=np.ones((3, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), weights=np.ones((3, 3)), out=np.ones((3, 4)))
    with pytest.raises(forms.BadInput, match="is 9 scores: past 8, explain judges out and q_rotated"):
        explained(tmp_path, **arrays)


def test_a_decode_over_a_long_cache_never_shares_k_and_v_to_every_head(tmp_path, monkeypatch):
    arrays = _causal(1, 96, 4, 2, 8, seed=4)
    np.savez(tmp_path / "decode.npz", **arrays)
    monkeypatch.setattr(forms, "STREAM_FROM", 0)
    p = problem.Problem(tmp_path / "decode.npz", problem.load(tmp_path / "decode.npz"))
    exact, plain, derived = blocks.stream(p, np.arange(1), err=lambda line: None)
    assert "k" not in vars(p) and "v" not in vars(p) and p.own_kv[0].dtype == np.float32
    assert exact["out"].shape == plain["out"].shape == derived["out"].shape == (1, 4, 1, 8)


def test_streamed_known_differences_are_tried_where_the_worst_is_and_said(tmp_path, monkeypatch):
    arrays = _causal(16, 16, 4, 2, 8, seed=6)
    arrays["out"][:, :, 9:] *= np.float32(1.5)
    monkeypatch.setattr(forms, "STREAM_FROM", 0)
    monkeypatch.setattr(blocks, "BLOCK_SCORES", 4)  # one K/V group past 4 x 4 elements of k
    code, text = explained(tmp_path, **arrays)
    assert code == 1 and "tried on query rows 9..9 of the query heads sharing K/V head 1, where the worst" in text, text


def test_a_long_cache_streams_though_its_scores_are_few(tmp_path, monkeypatch):
    monkeypatch.setattr(forms, "STREAM_FROM", 4 * 96)  # 4 heads x 1 query x 96 keys: scores within, k and v shared past
    np.savez(tmp_path / "decode.npz", **_causal(1, 96, 4, 2, 8, seed=4))
    assert problem.Problem(tmp_path / "decode.npz", problem.load(tmp_path / "decode.npz")).hidden is None


def test_running_out_of_memory_is_one_line_and_not_a_verdict(tmp_path, monkeypatch, capsys):
    np.savez(tmp_path / "case.npz", **_causal(8, 8, 2, 1, 8))

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 1.00 GiB")

    monkeypatch.setattr(blocks, "stream", exhausted)
    assert command.main(tmp_path / "case.npz", rows=1) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert (
        said[-1].startswith("error: ")
        and "ran out of memory (Unable to allocate 1.00 GiB): save fewer heads" in said[-1]
    )


def test_trying_the_known_differences_says_how_far_it_is(tmp_path, monkeypatch):
    """Each known difference is a whole oracle and bound: on a 16,384-key decode an outside trial waited 90 s in
    silence for them."""
    monkeypatch.setattr(blocks, "PROGRESS_S", 0.0)
    arrays = _causal(6, 6, 2, 1, 8)
    arrays["out"] = arrays["out"] * np.float32(1.5)
    code, text = explained(tmp_path, **arrays)
    assert code == 1 and "% of the float64 work done (the known differences now)" in text, text
