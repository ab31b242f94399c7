"""The optimizer step adds the gradient instead of subtracting it: gradient ascent."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.documents import SelfAttentionV1
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("sgd_cat_sat_mat", "sgd_batched_cube")


def sgd_step(x, w_query, w_key, w_value, g, lr):
    module = SelfAttentionV1(w_query, w_key, w_value)
    variables = [module.W_query, module.W_key, module.W_value]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(module(_t(x)) * _t(g))
    for variable, grad in zip(variables, tape.gradient(loss, variables)):
        variable.assign_add(lr * grad)
    return {"w_query": _np(module.W_query), "w_key": _np(module.W_key), "w_value": _np(module.W_value)}
