"""W_value used through .detach(): the forward is right, but W_value never gets a gradient."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.documents import SelfAttention_v1, _v1
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("gradients_v1_cat_sat_mat", "sgd_cat_sat_mat")


class Detached(SelfAttention_v1):
    def forward(self, x):
        queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value.detach()
        attn_weights = torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


def _detached(w_query, w_key, w_value):
    module = Detached(*w_query.shape)
    module.load_state_dict(_v1(w_query, w_key, w_value).state_dict())
    return module


def gradients(x, w_query, w_key, w_value, g, form):
    module = _detached(w_query, w_key, w_value)
    x = _t(x).requires_grad_()
    (module(x) * _t(g)).sum().backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in (module.W_query, module.W_key, module.W_value)]
    return {
        "grad_w_query": _np(grads[0]),
        "grad_w_key": _np(grads[1]),
        "grad_w_value": _np(grads[2]),
        "grad_x": _np(x.grad),
    }


def sgd_step(x, w_query, w_key, w_value, g, lr):
    module = _detached(w_query, w_key, w_value)
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    (module(_t(x)) * _t(g)).sum().backward()
    optimizer.step()
    return {"w_query": _np(module.W_query), "w_key": _np(module.W_key), "w_value": _np(module.W_value)}
