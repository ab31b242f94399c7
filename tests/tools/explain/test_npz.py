"""A user's FILE.npz read straight from the file (tools/explain/npz.py): np.load's arrays, byte for byte, whatever
np.savez stored; what it did not store plainly read by np.load; a damaged member, a file that is no .npz and a
misspelt key refused in one line that says what to do."""

import ml_dtypes
import numpy as np
import pytest

from attention_conformance.tools.explain import npz, problem

ARRAYS = dict(
    q=np.random.default_rng(0).standard_normal((2, 3, 4)),
    k=np.asfortranarray(np.arange(15, dtype=np.float32).reshape(5, 3)),
    v=np.arange(8, dtype=ml_dtypes.bfloat16).reshape(2, 4),  # stored as '<V2'
    out=np.zeros((0, 4), np.float32),
    dtype=np.array("bfloat16"),
    causal=np.array(True),
    num_kv_heads=np.array(3, np.int16),
    scale=np.float64(0.5),
)


def _read(path):
    with open(path, "rb") as file, np.load(file, allow_pickle=False) as stored:
        return npz.arrays(stored, file)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_every_array_is_np_loads_byte_for_byte(tmp_path, save):
    save(tmp_path / "case.npz", **ARRAYS)
    with np.load(tmp_path / "case.npz", allow_pickle=False) as stored:
        expected = {name: stored[name] for name in stored.files}
    got = _read(tmp_path / "case.npz")
    assert got.keys() == expected.keys()
    for name, array in expected.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tobytes(order="A") == array.tobytes(order="A"), name
        assert got[name].flags.f_contiguous == array.flags.f_contiguous, name


def test_a_member_whose_bytes_changed_is_refused_naming_the_file(tmp_path):
    np.savez(tmp_path / "case.npz", **ARRAYS)
    data = bytearray((tmp_path / "case.npz").read_bytes())
    at = data.find(ARRAYS["q"].tobytes())
    data[at + 5] ^= 1
    (tmp_path / "case.npz").write_bytes(bytes(data))
    with pytest.raises(
        problem.BadInput, match=r"case\.npz: not a readable \.npz, damaged .*Bad CRC-32 for file 'q\.npy'"
    ):
        problem.load(tmp_path / "case.npz")


def test_a_file_cut_short_is_refused_not_read(tmp_path):
    np.savez(tmp_path / "case.npz", q=np.zeros((64, 64)))
    data = (tmp_path / "case.npz").read_bytes()
    (tmp_path / "case.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(problem.BadInput, match=r"case\.npz: not a readable \.npz, damaged or cut short"):
        problem.load(tmp_path / "case.npz")


@pytest.mark.parametrize(
    "content, said", [(b"", "empty"), (b"q,k,v\n1,2,3\n", "not an .npz: no zip archive .np.savez writes one., no .npy")]
)
def test_a_file_that_is_no_npz_is_refused_without_numpys_pickle_advice(tmp_path, content, said):
    """np.load takes any other file for a pickle and advises allow_pickle=True: nothing here was pickled."""
    (tmp_path / "case.npz").write_bytes(content)
    with pytest.raises(problem.BadInput, match=rf"case\.npz: {said}$"):
        problem.load(tmp_path / "case.npz")


def test_a_misspelt_key_is_named_with_the_one_meant(tmp_path):
    np.savez(tmp_path / "case.npz", q=np.zeros((2, 4)), k=np.zeros((2, 4)), v=np.zeros((2, 4)), casual=np.array(True))
    with pytest.raises(problem.BadInput, match=r"unknown key 'casual' \(did you mean 'causal'\?\); keys: q, k, v"):
        problem.load(tmp_path / "case.npz")
