"""`attention-conformance examples DIR` (attention_conformance/tools/examples.py): one FILE.npz per example, each
with the inputs `explain` reads and a result computed the way its description says; a DIR that is a file, or
whose parent is missing, is refused with exit 2 and nothing written. tests/tools/explain/test_explain.py checks the
verdict `explain` gives each file."""

import numpy as np

from attention_conformance.tools import examples


def _sdpa(q, k, v, scale=None, hidden=None):
    """softmax(q k^T x scale) v in float64, True in `hidden` = a key the query does not see."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if hidden is not None:
        scores = np.where(hidden, -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def test_each_example_is_written_once_with_what_explain_reads(tmp_path, capsys):
    examples.write(tmp_path / "examples")
    written = sorted(p.name for p in (tmp_path / "examples").iterdir())
    assert written == sorted(f"{name}.npz" for name in examples.EXAMPLES)
    said = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[0] for line in said] == [
        str(tmp_path / "examples" / n) + ".npz" for n in examples.EXAMPLES
    ]
    for name in examples.EXAMPLES:
        with np.load(tmp_path / "examples" / f"{name}.npz") as f:
            assert {"q", "k", "v", "out"} <= set(f.files), name
            assert f["out"].shape == f["q"].shape[:-1] + f["v"].shape[-1:], name


def test_the_right_answer_is_close_to_the_math_and_each_mistake_is_the_mistake_it_names(tmp_path):
    examples.write(tmp_path)

    def load(name):
        with np.load(tmp_path / f"{name}.npz") as f:
            return {key: f[key] for key in f.files}

    right = load("sdpa_vs_reference")
    np.testing.assert_allclose(right["out"], _sdpa(right["q"], right["k"], right["v"]), rtol=1e-4, atol=1e-5)
    by_h = load("scale_by_head_size")
    np.testing.assert_allclose(by_h["out"], _sdpa(by_h["q"], by_h["k"], by_h["v"], scale=1 / 64), rtol=1e-4, atol=1e-5)
    assert not np.allclose(by_h["out"], _sdpa(by_h["q"], by_h["k"], by_h["v"]), atol=1e-3)
    inverted = load("mask_polarity")
    got = _sdpa(inverted["q"], inverted["k"], inverted["v"], hidden=~inverted["mask"])
    np.testing.assert_allclose(inverted["out"], got, rtol=1e-4, atol=1e-5)
    # The differences explain should name, and the ordinary ones it must not.
    assert examples.EXAMPLES["mask_polarity"] == (1, "inverted mask polarity")
    assert examples.EXAMPLES["sdpa_vs_reference"] == (0, None)


def test_a_directory_that_is_a_file_or_has_no_parent_is_refused_with_exit_2(tmp_path, capsys):
    (tmp_path / "taken").write_text("someone's file\n")
    assert examples.main(tmp_path / "taken") == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'taken'}: exists and is not a directory\n"
    assert (tmp_path / "taken").read_text() == "someone's file\n"
    assert examples.main(tmp_path / "no" / "such") == 2
    assert "no such directory (DIR is made, its parent must exist)" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    assert examples.main(tmp_path / "made") == 0
    assert len(list((tmp_path / "made").glob("*.npz"))) == len(examples.EXAMPLES)
