"""Rebuild the golden tensors, or (--check) recompute them and compare without writing.

Inputs are drawn once with torch's CPU generator, because the PyTorch document's numbers come
from it and no other framework reproduces it; every expected value is then computed in float64
by adapters/reference/ from those float32 inputs. Writing refuses to start if a regenerated
value no longer rounds to a number the documents print, and replaces files only after every
new file is complete on disk, manifest last.

    python golden/regenerate.py           # rewrite golden/ (needs torch)
    python golden/regenerate.py --check   # exit 1 naming each drifted tensor and element
"""

import argparse
import json
import math
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

from attention_conformance.adapters import reference
from attention_conformance.cases import golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.run import verify

DOC000_X = [  # 000_607594879886645b.txt, "X = torch.tensor([...])"
    [0.43, 0.15, 0.89],  # The
    [0.55, 0.87, 0.66],  # cat
    [0.57, 0.85, 0.64],  # sat
    [0.22, 0.58, 0.33],  # on
    [0.77, 0.25, 0.10],  # the
    [0.05, 0.80, 0.55],  # mat
]
DOC004_X = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]]  # 004_616018589080e108.txt
THERMOSTAT_S = [0.1, -0.2, 0.3, -0.2, 0.5]  # 000_607594879886645b.txt, "s = torch.tensor([...])"

RNG = (
    "torch.manual_seed(seed) then torch's CPU Mersenne Twister (torch.rand, nn.Linear's kaiming-uniform init); "
    "g, the loss weights, is the next draw: torch.rand(context.shape) * 2 - 1"
)
# golden file -> (seed, how its weights are drawn). Seeds 123 and 789 are the document's.
SEEDS = {
    "doc000_seed123.json": (123, "W_query, W_key, W_value = torch.rand(3, 2) three times, as the document; then g"),
    "doc000_seed789_v2.json": (789, "SelfAttention_v2(3, 2): three nn.Linear(3, 2, bias=False), [d_out, d_in]; then g"),
    "doc000_thermostat.json": (None, "no random draw: s as printed, float32"),
    "doc004_binary.json": (4, "torch.rand(4, 4) three times: the uniform draw the mapping table's left column makes"),
    "doc004_binary_v2.json": (
        789,
        "SelfAttention_v2(4, 4): d_in == d_out, so a missing transpose is silently wrong; then g",
    ),
    "batched_cube.json": (
        3,
        "x = torch.rand(3, 3, 3), then torch.rand(3, 3) three times: B == T == d_in == d_out; then g",
    ),
}
STAGE_INPUTS = {  # mapping-table row -> (reference function, float32 inputs drawn from the pipeline)
    "row_scores": (reference.transposed_matmul, ("query", "key")),
    "row_scaled": (reference.scale, ("scores", "d_k")),
    "row_weights": (reference.softmax, ("scaled",)),
    "row_context": (reference.blend, ("weights", "value")),
}


def _f32(t):
    return t.detach().numpy().astype(np.float32)


def _pipeline(x, w_query, w_key, w_value):
    """Inputs, float64 outputs, and per-row float32 inputs with their float64 outputs."""
    out = reference.attention(x, w_query, w_key, w_value)
    out["scaled"] = reference.scale(out["scores"], out["d_k"])
    tensors = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    tensors |= {name: out[name] for name in ("query", "key", "value", "scores", "scaled", "weights", "context")}
    # Each mapping-table row is tested alone on exact float32 inputs, so its expected value is
    # computed from those rounded inputs, not from the float64 chain.
    for row, (fn, args) in STAGE_INPUTS.items():
        inputs = [out["d_k"] if a == "d_k" else out[a].astype(np.float32) for a in args]
        tensors |= {f"{a}_f32": v for a, v in zip(args, inputs) if a != "d_k"}
        tensors[row] = fn(*inputs)
    return tensors


LR = 0.1  # the SGD step's learning rate, also in spec/attention.yaml


def _training(torch, tensors, form):
    """g, the loss weights of L = sum(context * g), drawn next from the same stream; the float64
    gradients in the layout of the stored weights; for v1 weights, the weights after one SGD step."""
    g = (torch.rand(tensors["context"].shape) * 2 - 1).numpy().astype(np.float32)
    weights = [tensors[w] for w in ("w_query", "w_key", "w_value")]
    out = {"g": g} | reference.gradients(tensors["x"], *weights, g, form)
    if form == "v1":
        out |= {f"sgd_{k}": v for k, v in reference.sgd_step(tensors["x"], *weights, g, LR).items()}
    return tensors | out


def _linear_weights(torch, seed, d_in, d_out):
    """W_query, W_key, W_value as three nn.Linear(d_in, d_out, bias=False) draw them, the same bits on
    every CPU. torch's uniform_(low, high) computes u * (high - low) + low in float64 in its AVX2 and
    AVX-512 kernels but in float32 in its default one (ATEN_CPU_CAPABILITY=default: 1 ULP off in
    w_query[0, 0] at seed 789, measured). torch.rand's u is exact in both, so the float64 formula is
    applied here; wherever torch runs a vectorised kernel it must agree, and is checked to."""
    torch.manual_seed(seed)
    fan_in = d_in  # kaiming_uniform_(a=sqrt(5)), as nn.Linear.reset_parameters: bound = 1/sqrt(fan_in)
    bound = math.sqrt(3.0) * (
        torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(fan_in)
    )  # torch's order
    low, high = np.float64(np.float32(-bound)), np.float64(np.float32(bound))
    weights = [
        (_f32(torch.rand(d_out, d_in)).astype(np.float64) * (high - low) + low).astype(np.float32) for _ in range(3)
    ]
    if torch.backends.cpu.get_cpu_capability() != "DEFAULT":
        torch.manual_seed(seed)
        drawn = [_f32(torch.nn.Linear(d_in, d_out, bias=False).weight) for _ in range(3)]
        if not all(np.array_equal(a, b) for a, b in zip(weights, drawn)):
            raise RuntimeError(
                f"nn.Linear's initialisation at seed {seed} no longer matches its emulation here: "
                "update _linear_weights"
            )
    return weights


def build():
    """{file name: (description, {tensor: ndarray})}, deterministic."""
    import torch

    files = {}
    x = np.array(DOC000_X, dtype=np.float32)
    torch.manual_seed(123)
    w = [_f32(torch.rand(3, 2)) for _ in range(3)]
    files["doc000_seed123.json"] = (
        "The cat sat on the mat, seed-123 weights [d_in, d_out]",
        _training(torch, _pipeline(x, *w), "v1"),
    )

    w2 = _linear_weights(torch, 789, 3, 2)
    v1_layout = [wi.T.copy() for wi in w2]
    files["doc000_seed789_v2.json"] = (
        "The cat sat on the mat, SelfAttention_v2 at seed 789; w_* in nn.Linear layout [d_out, d_in]",
        _training(torch, _pipeline(x, *v1_layout) | {"w_query": w2[0], "w_key": w2[1], "w_value": w2[2]}, "v2"),
    )

    s = np.array(THERMOSTAT_S, dtype=np.float32)
    s8 = s * np.float32(8)  # exact: multiplying by a power of two
    s2000 = s * np.float32(2000)  # exp(1000) overflows even float64: softmax must subtract the max
    files["doc000_thermostat.json"] = (
        "Softmax thermostat: s, 8 s and 2000 s (float32), their softmax (float64)",
        {
            "s": s,
            "s_x8": s8,
            "s_x2000": s2000,
            "softmax_s": reference.softmax(s),
            "softmax_s_x8": reference.softmax(s8),
            "softmax_s_x2000": reference.softmax(s2000),
        },
    )

    xb = np.array(DOC004_X, dtype=np.float32)
    torch.manual_seed(4)
    wb = [_f32(torch.rand(4, 4)) for _ in range(3)]
    files["doc004_binary.json"] = (
        "Binary 5x4 X of the TF.js document, uniform weights [d_in, d_out]",
        _pipeline(xb, *wb),
    )

    wb2 = _linear_weights(torch, 789, 4, 4)
    files["doc004_binary_v2.json"] = (
        "Binary 5x4 X, SelfAttention_v2(4, 4) at seed 789; w_* in nn.Linear layout [d_out, d_in]",
        _training(
            torch,
            _pipeline(xb, *[wi.T.copy() for wi in wb2]) | {"w_query": wb2[0], "w_key": wb2[1], "w_value": wb2[2]},
            "v2",
        ),
    )

    torch.manual_seed(3)
    xc = _f32(torch.rand(3, 3, 3))
    wc = [_f32(torch.rand(3, 3)) for _ in range(3)]
    files["batched_cube.json"] = (
        "Batch of 3 sequences of 3 tokens, d_in = d_out = 3: .T on 3-D fits silently",
        _training(torch, _pipeline(xc, *wc), "v1"),
    )
    return files


def manifest_text(hashes):
    import torch

    manifest = {
        "generator": "golden/regenerate.py",
        "rng": RNG,
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__},
        "files": {
            name: {"sha256": hashes[name], "seed": SEEDS[name][0], "draw": SEEDS[name][1]} for name in sorted(hashes)
        },
    }
    return json.dumps(manifest, indent=2) + "\n"


def drift(built, directory):
    """One line per stored tensor that differs from the rebuilt one, or is missing or extra."""
    problems = []
    try:
        stored = golden.Goldens(directory)
    except golden.GoldenError as exc:
        return [str(exc)]
    for name in sorted(set(built) | set(stored.hashes)):
        if name not in built:
            problems.append(f"{name}: stored but no longer generated")
            continue
        try:
            old = stored.file(name)
        except golden.GoldenError as exc:
            problems.append(str(exc))
            continue
        new = built[name][1]
        for tensor in sorted(set(new) | set(old)):
            at = f"{name}#{tensor}"
            if tensor not in old or tensor not in new:
                problems.append(
                    f"{at}: {'missing from the stored file' if tensor not in old else 'no longer generated'}"
                )
            elif old[tensor].shape != new[tensor].shape or old[tensor].dtype != new[tensor].dtype:
                problems.append(
                    f"{at}: stored {old[tensor].dtype}{list(old[tensor].shape)}, "
                    f"rebuilt {new[tensor].dtype}{list(new[tensor].shape)}"
                )
            else:
                # Bit for bit: inputs are data, and the oracle's results are the same bytes on
                # every machine (attention_conformance/deterministic.py).
                err = np.abs(old[tensor].astype(np.float64) - new[tensor])
                if err.size and not np.array_equal(old[tensor], new[tensor]):
                    i = np.unravel_index(np.argmax(err), err.shape)
                    problems.append(
                        f"{at}{[int(n) for n in i]}: stored {float(old[tensor][i])!r}, "
                        f"rebuilt {float(new[tensor][i])!r}"
                    )
    return problems


def _write_atomically(files, directory):
    """Write every file beside its target first; replace the targets only once all are on disk."""
    staged = []
    try:
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
            staged.append((tmp, directory / name))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        for tmp, target in staged:  # MANIFEST.json is last in `files`: a crash before it is caught by sha256
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; goldens are ordinary repository files
            os.replace(tmp, target)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.remove(tmp)


def printed_mismatches(built):
    """Lines for every printed number the reference no longer reproduces from these goldens."""
    spec = loader.load()
    goldens = golden.Goldens(files={name: tensors for name, (_, tensors) in built.items()})
    problems = []
    for case in spec.cases.values():
        for exp in case.expect.values():
            if exp.printed is not None:
                try:
                    verify.verify(spec, "reference", reference, case, exp.output, "float64", goldens)
                except Nonconformance as exc:
                    problems.append(str(exc))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare; write nothing")
    parser.add_argument("--dir", type=Path, default=golden.GOLDEN_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    built = build()
    if args.check:
        problems = drift(built, args.dir)
        for line in problems:
            print(f"DRIFT {line}")
        print(
            f"golden check: {len(problems)} drifted tensor(s) in {args.dir}"
            if problems
            else f"golden check: {args.dir} matches a fresh rebuild"
        )
        return 1 if problems else 0

    mismatches = printed_mismatches(built)
    if mismatches:
        for line in mismatches:
            print(f"REFUSED {line}")
        print("nothing written: regenerated values no longer round to the numbers the documents print")
        return 1
    texts = {name: golden.render(description, tensors) for name, (description, tensors) in sorted(built.items())}
    hashes = {name: golden.sha256(text.encode("utf-8")) for name, text in texts.items()}
    texts[golden.MANIFEST] = manifest_text(hashes)
    _write_atomically(texts, args.dir)
    print(f"wrote {len(texts)} files to {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
