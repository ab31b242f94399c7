"""PyTorch, written the way the PyTorch document writes it (SelfAttention_v1 and _v2)."""

import torch

from .bands import *
from .chunks import *
from .cross import *
from .documents import *
from .heads import *
from .layers import *
from .logits import *
from .modes import MODES, in_mode
from .norms import *
from .rope_scaling import *
from .rotary import *
from .varlen import *

DTYPES = ("float32", "float64", "float16", "bfloat16")


NOT_APPLICABLE = {
    "sink_decode_paths": "F.scaled_dot_product_attention takes no sinks",
    "cache_flag": (
        "F.scaled_dot_product_attention takes no KV cache; a cache is the caller's concatenation "
        "(decode_attention's stepwise)"
    ),
    "softcap_flag": (
        "torch's SDPA takes no soft cap (flex_attention's score_mod would be the user's own function, eager "
        "flex_attention a debugging path)"
    ),
    "fused_sink_attention": "torch's SDPA takes no sinks (gpt-oss's torch code concatenates them, as sink_attention)",
    "fused_rotary": (
        "core torch has no RoPE kernel (torchtune's RotaryPositionalEmbeddings and HF's are modules written from "
        "these ops, rotary_embedding's)"
    ),
    "window_flag": (
        "torch has no sliding-window switch: F.scaled_dot_product_attention takes none, and flex_attention's "
        "mask_mod is the user's own band (eager flex_attention is a debugging path, its own warning says)"
    ),
    "band_flag": (
        "torch has no window switch: F.scaled_dot_product_attention takes none, and flex_attention's mask_mod is "
        "the user's own band (band_attention's, built from torch's ops)"
    ),
    "attention_layer": "keras.layers.Attention's case; nn.MultiheadAttention owns its projections",
    "attention_stages": "F.scaled_dot_product_attention returns its output alone, none of its scores",
    "packed_fused_attention": "F.scaled_dot_product_attention takes heads on their own axis [B, N, T, H], no counts",
    "key_padding_flag": (
        "F.scaled_dot_product_attention takes no key lengths: padding is a boolean attn_mask (mask_conventions')"
    ),
    "grouped_attention_layer": (
        "torch.nn has no grouped-query attention layer (nn.MultiheadAttention has one K/V head per query head); "
        "grouped heads run through F.scaled_dot_product_attention(enable_gqa=True)"
    ),
    "compiled": {
        "exercise_3_1": (
            "torch 2.13's Inductor asserts the strides a parameter had before `.data = w.T.clone()` gave it a "
            "transposed one: AssertionError: expected size 3==3, stride 2==1 at dim=0; expected size 2==2, stride "
            "1==3 at dim=1 (measured)"
        ),
    },
}


def version():
    return f"torch {torch.__version__}"


def pin_numerics():
    # On an AMX CPU, "medium" runs float32 matmuls of size >= 32 in bfloat16 (relative error ~2e-3, far
    # beyond float32's tolerance); TF32 only matters on a GPU, whose float32 must be a CPU's.
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return {
        "torch.float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        # Not switches set here, but what picks torch's CPU kernels: recorded beside them.
        "torch.cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch.num_threads": torch.get_num_threads(),
    }


def devices():
    return ["cpu"] + ["gpu"] * torch.cuda.is_available()


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])
