"""FlexAttention's sliding window on a decode block with the mask_mod's q taken as the key's position: q counts the
block's own rows (0..T-start-1, create_block_mask's Q_LEN), so the band sits top-left, start keys early. Only the
compiled column runs flex_attention (eager declares window_flag not applicable)."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.flex import _flexed
from attention_conformance.adapters.torch.shared import _np, _t

RUN_MODE = "compiled"
EXPECTED = "caught"
MUST_FAIL = ("window_flag_chunk", "window_flag_one_token")


def window_flag(x, w_query, w_key, w_value, window, start):
    x = _t(x)
    queries, keys, values = (
        t.reshape(-1, 1, *t.shape[-2:]) for t in (x[..., start:, :] @ _t(w_query), x @ _t(w_key), x @ _t(w_value))
    )
    context = _flexed(
        queries, keys, values, mask_mod=lambda b, q, k: (k <= q) & (k > q - window)
    )  # the bug: no + start
    return _np(context.reshape(*x.shape[:-2], *context.shape[-2:]))
