"""The dtypes the suite knows, and NumPy's dtype for each name."""

import numpy as np

DTYPES = ("float64", "float32", "float16", "bfloat16")  # every dtype the suite knows, widest first
LOW_PRECISION = ("float16", "bfloat16")


def np_dtype(name):
    """NumPy's dtype for a spec dtype name; bfloat16 comes from ml_dtypes, as in JAX and TF."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
