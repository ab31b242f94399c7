"""The dtypes the suite knows (attention_conformance/dtypes.py): each name is NumPy's dtype of that width and
precision, bfloat16 the ml_dtypes one the frameworks share, listed widest first."""

import ml_dtypes
import numpy as np
import pytest

from attention_conformance.dtypes import DTYPES, LOW_PRECISION, np_dtype

# name -> (bytes, mantissa bits): what each dtype must hold, written from IEEE 754 and bfloat16's definition.
FORMATS = {"float64": (8, 52), "float32": (4, 23), "float16": (2, 10), "bfloat16": (2, 7)}


@pytest.mark.parametrize("name", DTYPES)
def test_each_name_is_a_float_of_its_width_and_precision(name):
    dtype = np_dtype(name)
    assert dtype.name == name and dtype.itemsize == FORMATS[name][0]
    assert ml_dtypes.finfo(dtype).nmant == FORMATS[name][1]


def test_bfloat16_is_ml_dtypes_own_and_rounds_as_bfloat16():
    assert np_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    # 1 + 2**-8 is half a bfloat16 unit above 1: ties to even, back to 1; float16 keeps it.
    assert float(np.array(1 + 2**-8).astype(np_dtype("bfloat16"))) == 1.0
    assert float(np.array(1 + 2**-8).astype(np_dtype("float16"))) == 1 + 2**-8
    assert float(np.array(1e38).astype(np_dtype("bfloat16"))) == pytest.approx(1e38, rel=2**-8)  # float32's range


def test_the_dtypes_are_widest_first_and_the_low_precision_ones_are_the_two_bytes():
    assert list(DTYPES) == sorted(DTYPES, key=lambda name: -ml_dtypes.finfo(np_dtype(name)).bits)
    assert set(LOW_PRECISION) == {name for name in DTYPES if np_dtype(name).itemsize == 2}


def test_an_unknown_name_is_refused():
    with pytest.raises(TypeError):
        np_dtype("float8")
