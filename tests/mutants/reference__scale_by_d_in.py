"""The pipeline divides by sqrt(d_in), the embedding size, instead of sqrt(d_k), the key size."""

import numpy as np

from attention_conformance.adapters.reference import *
from attention_conformance.adapters.reference import blend, project, softmax, transposed_matmul

EXPECTED = "caught"
MUST_FAIL = ("sat", "cat_sat_mat_shapes")  # d_in = 3, d_k = 2; on the binary X both are 4 and it hides


def attention(x, w_query, w_key, w_value):
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    scores = transposed_matmul(queries, keys)
    weights = softmax(scores / np.sqrt(np.shape(x)[-1]))
    return {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": scores,
        "d_k": keys.shape[-1],
        "weights": weights,
        "context": blend(weights, values),
    }
