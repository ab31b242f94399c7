"""FlexAttention's sliding window on a decode block with the mask_mod's q taken as the key's position: q counts the
block's own rows (0..T-start-1, create_block_mask's Q_LEN), so the band sits top-left, start keys early. Only the
compiled column runs flex_attention (eager declares window_flag not applicable)."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.flex import _one_head

RUN_MODE = "compiled"
EXPECTED = "caught"
MUST_FAIL = ("window_flag_chunk", "window_flag_one_token")


def window_flag(x, w_query, w_key, w_value, window, start):
    # the bug: the band on the block's row, q - start, where the real adapter's is q, the query's absolute position
    return _one_head(
        x, w_query, w_key, w_value, start, mask_mod=lambda b, q, k: (k <= q - start) & (k > q - start - window)
    )
