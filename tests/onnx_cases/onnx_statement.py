"""An ONNX Attention (opsets 23-25) or RotaryEmbedding node, with its inputs and outputs, stated as `explain`'s
FILE.npz keys (attention_conformance/tools/problem.py, KEYS): what test_onnx_cases.py judges ONNX's expected
outputs and ONNX Runtime's by. Each mapping is the operator's text (onnx/defs/nn/defs.cc, Attention-24's and 25's
docs; RotaryEmbedding-23's); a reshape, concatenation, padding or gather here moves numbers without changing one."""

import ml_dtypes
import numpy as np
from onnx import helper

# qk_matmul_output_mode 0..3: the raw (scaled) product, after the soft cap, after the bias and masks, the softmax's
# output. ONNX folds the scale into Q and K (sqrt(scale) each), so its "qk matmul" is explain's scaled scores.
QK_STAGES = ("scaled", "capped", "masked", "weights")


class NotStated(Exception):
    """A node explain cannot state: the message says why."""


def attributes(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


# The operators' names for their inputs and outputs, in order (a node names its own; an empty one is omitted).
FORMAL = {
    "Attention": (
        ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"),
        ("Y", "present_key", "present_value", "qk_matmul_output"),
    ),
    "RotaryEmbedding": (("input", "cos_cache", "sin_cache", "position_ids"), ("output",)),
}


def formal(node, by_name, side):
    """{the operator's name: array} for the node's inputs (side "inputs") or outputs, from {the node's name: array}."""
    names, given = FORMAL[node.op_type][side != "inputs"], node.input if side == "inputs" else node.output
    return {name: by_name[own] for name, own in zip(names, given) if own and own in by_name}


def _wide(a):
    """bfloat16 stored as float32 (explain reads bfloat16 as float32 with dtype='bfloat16'); others as given."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a


def _packed(t):
    """[B, K, S, H] -> [B, S, K x H]: a cache of 3D inputs joins the new keys packed as they are."""
    return np.reshape(np.swapaxes(t, 1, 2), t.shape[:1] + t.shape[2:3] + (-1,))


def statement(node, feeds):
    """explain's keys for the node's inputs, {the operator's input name: array} (formal)."""
    if node.op_type not in FORMAL:
        raise NotStated(f"{node.op_type} is not an attention")
    return (_rotary if node.op_type == "RotaryEmbedding" else _attention)(attributes(node), feeds)


def _attention(a, feeds):
    q, k, v = (feeds[n] for n in ("Q", "K", "V"))
    keys = {}
    if q.dtype == ml_dtypes.bfloat16:
        keys["dtype"] = np.array("bfloat16")
    if q.ndim == 3:
        keys |= dict(num_heads=np.array(a["q_num_heads"]), num_kv_heads=np.array(a["kv_num_heads"]))
    elif q.shape[1] != k.shape[1]:
        keys["num_kv_heads"] = np.array(k.shape[1])
    past = feeds.get("past_key")
    if past is not None:  # the internal cache: its keys first, then the new ones (ONNX's present_key)
        join = (lambda cached, new: np.concatenate([_packed(cached), new], axis=1)) if q.ndim == 3 else None
        join = join or (lambda cached, new: np.concatenate([cached, new], axis=2))
        k, v = join(past, k), join(feeds["past_value"], v)
    S = k.shape[-2] if q.ndim == 4 else k.shape[1]
    T = q.shape[-2] if q.ndim == 4 else q.shape[1]
    keys |= dict(q=_wide(q), k=_wide(k), v=_wide(v))
    mask = feeds.get("attn_mask")
    if mask is not None:
        short = S - mask.shape[-1]  # opset 24: a shorter last axis is padded, -inf (float) or False (bool)
        if short:
            pad = [(0, 0)] * (mask.ndim - 1) + [(0, short)]
            mask = np.pad(mask, pad, constant_values=False if mask.dtype == bool else -np.inf)
        if mask.dtype == bool:
            keys["mask"] = ~mask  # ONNX's True attends; explain's True hides
        else:
            keys["bias"] = _wide(mask)
    causal = bool(a.get("is_causal", 0))
    keys["causal"] = np.array(causal)
    left, right = a.get("left_window_size", -1), a.get("right_window_size", -1)
    unbounded = S + T  # wider than any band these keys and queries make
    if left >= 0 or right >= 0 and not causal:
        keys["window"] = np.array(left + 1 if left >= 0 else unbounded)
        if not causal:
            keys["right_window"] = np.array(right if right >= 0 else unbounded)
    if "nonpad_kv_seqlen" in feeds:
        keys["valid_length"] = feeds["nonpad_kv_seqlen"].astype(np.int64)
    elif past is not None:
        keys["position"] = np.array(past.shape[2])
    elif causal or "window" in keys:
        keys["position"] = np.array(0)  # no cache: offset 0, top-left (Attention-24's is_causal)
    if a.get("scale") is not None:
        keys["scale"] = np.array(float(a["scale"]))
    if a.get("softcap", 0.0):
        keys["softcap"] = np.array(float(a["softcap"]))
    # softmax_precision: a softmax in a wider type than T1 is one correct computation of the same attention.
    return keys


def _rotary(a, feeds):
    x, cos, sin = feeds["input"], feeds["cos_cache"], feeds["sin_cache"]
    ids = feeds.get("position_ids")
    if ids is None:  # the caches already per query, [B, T, R/2]: one table of B x T rows, each query its own row
        B, T = cos.shape[:2]
        cos, sin = np.reshape(cos, (B * T, -1)), np.reshape(sin, (B * T, -1))
        ids = np.arange(B * T).reshape(B, T)
    keys = dict(q=_wide(x), k=_wide(x), v=_wide(x))  # keys and values stand in: only q_rotated is judged
    if x.ndim == 3:
        keys["num_heads"] = np.array(a["num_heads"])
    if a.get("rotary_embedding_dim", 0):
        keys["rotary_dim"] = np.array(a["rotary_embedding_dim"])
    pairing = "interleaved" if a.get("interleaved", 0) else "rotate_half"
    return keys | dict(pairing=np.array(pairing), cos=_wide(cos), sin=_wide(sin), position_ids=ids.astype(np.int64))


def results(node, produced):
    """explain's keys for the node's outputs, {the operator's output name: array}: Y as out, qk_matmul_output as the
    stage its mode names, RotaryEmbedding's output as q_rotated. present_key and present_value are copies: judged
    apart (presents)."""
    if node.op_type == "RotaryEmbedding":
        return dict(q_rotated=_wide(produced["output"]))
    keys = dict(out=_wide(produced["Y"]))
    if "qk_matmul_output" in produced:
        keys[QK_STAGES[attributes(node).get("qk_matmul_output_mode", 0)]] = _wide(produced["qk_matmul_output"])
    return keys


def presents(node, feeds):
    """{output name: what ONNX's present_key and present_value hold}: the past and the new keys, concatenated."""
    if "past_key" not in feeds:
        return {}
    found = {}
    for name, past, new in (("present_key", "past_key", "K"), ("present_value", "past_value", "V")):
        fresh = feeds[new]
        if fresh.ndim == 3:  # [B, S, K x H] -> [B, K, S, H], as the cache is
            fresh = np.swapaxes(np.reshape(fresh, fresh.shape[:2] + (feeds[past].shape[1], -1)), 1, 2)
        found[name] = np.concatenate([feeds[past], fresh], axis=2)
    return found
