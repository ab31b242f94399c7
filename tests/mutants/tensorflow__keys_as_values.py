"""The blend uses the keys where the values belong: "score with keys, blend with values" mixed up."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.documents import SelfAttentionV1
from attention_conformance.adapters.tensorflow.shared import _matmul, _np, _scaled_softmax, _t

EXPECTED = "caught"
MUST_FAIL = ("v1_seed123", "v1_batched_cube")


class KeysAsValues(SelfAttentionV1):
    def __call__(self, x):
        keys = _matmul(x, self.W_key)
        attn_scores = tf.linalg.matmul(_matmul(x, self.W_query), keys, transpose_b=True)
        return tf.linalg.matmul(_scaled_softmax(attn_scores, keys), keys)


def self_attention_v1(x, w_query, w_key, w_value):
    context = KeysAsValues(w_query, w_key, w_value)(_t(x))
    return {"context": _np(context), "context_no_grad": _np(context)}
