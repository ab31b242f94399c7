"""The one place where numeric switches are pinned, and the record of what they are.

Each switch here changes results on some machine this suite runs on: on this repository's
AMX CPU, torch.set_float32_matmul_precision("medium") runs float32 matmuls of size >= 32
in bfloat16 (relative error ~2e-3, far beyond the float32 tolerance). TF32 switches only
matter on GPUs, but a GPU run must compute the same float32 as a CPU run.
Only frameworks already imported are touched: pinning never imports one.
"""

import sys

from attention_conformance import oracle_cache


def _torch(torch):
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return {
        "torch.float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        # Not switches this module sets, but what picks torch's CPU kernels: recorded beside them.
        "torch.cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch.num_threads": torch.get_num_threads(),
    }


def _tensorflow(tf):
    tf.config.experimental.enable_tensor_float_32_execution(False)
    return {"tensorflow.tensor_float_32_execution": tf.config.experimental.tensor_float_32_execution_enabled()}


def _jax(jax):
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_enable_x64", True)  # else float64 arrays silently become float32
    # Not numeric, and so not recorded: XLA executables kept on disk beside the oracle cache, so a
    # rerun loads what an earlier run compiled (a user's own JAX_COMPILATION_CACHE_DIR wins).
    cache = oracle_cache.directory()
    if cache is not None and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(cache / "xla"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the spec's compiles are small and many
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return {
        "jax.default_matmul_precision": jax.config.jax_default_matmul_precision,
        "jax.enable_x64": jax.config.jax_enable_x64,
    }


_PINS = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax}


def pin():
    """Pin every imported framework's switches; return {switch: value} as now set."""
    record = {}
    for module_name, pin_one in _PINS.items():
        if module_name in sys.modules:
            record.update(pin_one(sys.modules[module_name]))
    return record
