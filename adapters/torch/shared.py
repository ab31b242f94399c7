"""PyTorch: what the families share: NumPy to torch and back (bfloat16 by its bits), the causal mask, heads split."""

import ml_dtypes
import numpy as np
import torch


def _t(a):
    a = np.array(a)  # a copy: torch never aliases the caller's data
    if a.dtype == ml_dtypes.bfloat16:  # NumPy has no bfloat16 of its own; same bits, torch's dtype
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _np(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # above the diagonal: the future


def _split_heads(
    t, n, head_dim
):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head, as SDPA takes them; a view, no copy
    return t.view(*t.shape[:-1], n, head_dim).transpose(-3, -2)
