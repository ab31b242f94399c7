"""PyTorch, written the way the PyTorch document writes it (SelfAttention_v1 and _v2)."""

import torch

from .bands import *
from .chunks import *
from .cross import *
from .documents import *
from .flex import *
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
    "fused_sink_attention": (
        "torch's SDPA takes no sinks (gpt-oss's torch code concatenates them, as sink_attention), and flex_attention "
        "gives a sink's share only through return_lse, refused on the CPU: torch.compile on CPU only supports "
        "inference and `return_lse` is not supported yet (torch 2.13.0, measured)"
    ),
    "fused_rotary": (
        "core torch has no RoPE kernel (torchtune's RotaryPositionalEmbeddings and HF's are modules written from "
        "these ops, rotary_embedding's)"
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
    # FlexAttention's ops (flex.py): torch's switch for these is flex_attention, which runs compiled on the CPU.
    "eager": {
        op: (
            "torch's route is flex_attention, whose eager call is an unfused debugging path (its own warning says so): "
            "the compiled column runs it"
        )
        for op in ("softcap_flag", "window_flag", "band_flag")
    },
    "compiled": {
        **{
            f"{op}/float64": (
                "flex_attention refuses float64 on the CPU: NotImplementedError: `torch.float` , `torch.float16` "
                "and `torch.bfloat16` are supported in FlexAttention for CPU device (torch 2.13.0, measured)"
            )
            for op in ("softcap_flag", "band_flag", "alibi_flag")
        },
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
