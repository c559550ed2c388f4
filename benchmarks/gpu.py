"""The GPU check: every Triton fused attention kernel against the row maps in float64; forward and
forward+backward time and peak memory against ``scaled_dot_product_attention`` in the same run; one optimizer
step of each study's full-budget model; and, with the time left, a short Reverse run (``gpu_train``). Between them,
the commands whose device paths the tests run only on the CPU, run on the GPU against the CPU (``gpu_paths``).

    python benchmarks/gpu.py [--lengths 4096,16384,65536] [--budget-seconds 420] [--out benchmarks/results/gpu.json]
    python benchmarks/gpu.py --dry            # CPU, Triton's interpreter, tiny shapes (the suite runs this)

Uses only the machine's own torch, triton and transformers and the working tree: no download, no model file.
Exactness: each kernel on random q, k, v (causal, a sliding window, GQA, ALiBi slopes) against ``attnlab.rowmaps``
applied to the masked float64 scores, outputs and gradients, as the largest error over the largest reference entry.
Speed: per length, bfloat16, batch 1, 8 query / 2 KV heads of 64 (GQA), causal, the median of ``--repeats`` timed
calls after one warm-up, and the peak of ``torch.cuda.max_memory_allocated`` over the call, as ratios to SDPA (flash
on a GPU) on the same tensors in the same run; NAPE softmax (Vasylenko et al. 2025 §4.2: half the heads NoPE, half
ALiBi) goes through the site as the decoder calls it. Every part checks one deadline, ``--budget-seconds`` from the
start, and records what it left out; the Reverse run gets at least its share of it. The dry run's times are the
interpreter's and the CPU's at shrunk shapes: they check the script, not the speed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

KERNELS = {
    "relu_p4_b0": dict(family="relu_p", p=4.0, b=0.0),
    "relu_p2_b0.5": dict(family="relu_p", p=2.0, b=0.5),
    "sigmoid_b0": dict(family="sigmoid", b=0.0),
    "entmax_a1.5": dict(alpha=1.5),
}
MASKS = {"causal": dict(), "window 5": dict(window=5), "ALiBi slopes": dict(slopes=True)}
NAPE = "NAPE softmax"


def _fused(name: str):
    from attnlab.site.triton.entmax import entmax_attention
    from attnlab.site.triton.relu_sigmoid import relu_sigmoid_attention

    fn = entmax_attention if "alpha" in KERNELS[name] else relu_sigmoid_attention

    def run(q, k, v, **mask):
        return fn(q, k, v, **KERNELS[name], **mask)

    return run


def _nape(q, k, v):
    """Softmax under NAPE's slopes through the site, with the query block the decoder would choose."""
    from attnlab.model.decoder import block_rows
    from attnlab.model.positions import nape_slopes
    from attnlab.site import DEFAULT_BLOCK, Causal, Plan, Scores, Slopes, attend

    slopes = Slopes(nape_slopes(q.shape[1]).to(q.device))
    plan = Plan(block=block_rows(DEFAULT_BLOCK, q.shape[0], q.shape[1], k.shape[2]))
    return attend(q, k, v, Scores(q.shape[-1] ** -0.5, bias=slopes), Causal(), plan)


def exactness(device, dry: bool) -> list[dict]:
    """Per kernel and mask: the largest output and gradient errors against the float64 row-map reference."""
    import torch

    from attnlab import rowmaps

    g = torch.Generator().manual_seed(0)
    shapes = ((1, 4, 19, 16), (1, 2, 23, 16), (1, 2, 23, 16), (1, 4, 19, 16))
    q, k, v, dout = (torch.randn(*s, generator=g) for s in shapes)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0])
    rows = []
    for name in KERNELS:
        for label, mask in MASKS.items():
            mask = {**mask, "slopes": slopes.to(device)} if mask.get("slopes") else mask
            leaves = [t.to(device).clone().requires_grad_() for t in (q, k, v)]
            out = _fused(name)(*leaves, block_q=16, block_k=16, **mask)
            out.backward(dout.to(device))
            want = _reference(q, k, v, dout, name, rowmaps, window=mask.get("window"), slopes=mask.get("slopes"))
            got = [out.detach(), *(t.grad for t in leaves)]
            err = [float((a.double().cpu() - b).abs().max() / b.abs().max()) for a, b in zip(got, want)]
            rows.append({"kernel": name, "mask": label, "out": err[0], "dq": err[1], "dk": err[2], "dv": err[3]})
            print(f"| {name} | {label} | " + " | ".join(f"{e:.1e}" for e in err) + " |", flush=True)
    return rows


def _reference(q, k, v, dout, name, rowmaps, *, window=None, slopes=None):
    """Output and gradients in float64 from the row map on explicitly masked scores (GQA by repeating k, v)."""
    import torch

    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    n_q, n_k = q.shape[2], k.shape[2]
    i = torch.arange(n_q)[:, None] + n_k - n_q
    j = torch.arange(n_k)[None, :]
    allowed = (j <= i) & ((j > i - window) if window else True)
    z = q @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5
    if slopes is not None:
        z = z - slopes.double().cpu()[:, None, None] * (i - j).clamp(min=0)
    out = rowmaps.get(name)(z.masked_fill(~allowed, -torch.inf), allowed) @ vv
    out.backward(dout.double())
    return [out.detach(), q.grad, k.grad, v.grad]


def _timed(fn, repeats: int, device) -> tuple[float, float | None]:
    import torch

    cuda = device.type == "cuda"
    fn()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), torch.cuda.max_memory_allocated() / 2**20 if cuda else None


def speed(lengths: list[int], device, dtype, repeats: int, clock) -> list[dict]:
    """Forward and forward+backward of each kernel, of NAPE softmax and of SDPA on the same tensors; ratios to
    SDPA. A variant the deadline or the memory does not allow is recorded as such."""
    import torch
    import torch.nn.functional as F

    rows = []
    for n in lengths:
        g = torch.Generator(device=device).manual_seed(0)
        q = torch.randn(1, 8, n, 64, generator=g, device=device, dtype=dtype, requires_grad=True)
        k, v = (torch.randn(1, 2, n, 64, generator=g, device=device, dtype=dtype, requires_grad=True) for _ in "kv")
        variants = {
            "SDPA": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        }
        variants |= {name: (lambda name=name, q=q, k=k, v=v: _fused(name)(q, k, v)) for name in KERNELS}
        variants[NAPE] = lambda q=q, k=k, v=v: _nape(q, k, v)
        base = {}
        for name, fn in variants.items():
            got = _measured(fn, repeats, device, clock) if base or name == "SDPA" else "SDPA did not run"
            if isinstance(got, str):
                rows.append({"tokens": n, "variant": name, "skipped": got})
                print(f"| {n} | {name} | {got} | | | |", flush=True)
                continue
            (fwd, fwd_mem), (both, both_mem) = got
            base = base or {"fwd": fwd, "both": both}
            row = {
                "tokens": n,
                "variant": name,
                "forward s": fwd,
                "forward+backward s": both,
                "forward ratio": fwd / base["fwd"],
                "forward+backward ratio": both / base["both"],
                "forward peak MiB": fwd_mem,
                "forward+backward peak MiB": both_mem,
            }
            rows.append(row)
            print(
                f"| {n} | {name} | {fwd:.4f} s ({row['forward ratio']:.2f}x) | {both:.4f} s "
                f"({row['forward+backward ratio']:.2f}x) | {_mib(fwd_mem)} | {_mib(both_mem)} |",
                flush=True,
            )
    return rows


def _measured(fn, repeats: int, device, clock):
    """Forward and forward+backward (seconds, peak MiB) of ``fn``, or why they were not measured: the deadline,
    or the memory."""
    import torch

    if clock.left(reserve=True) <= 0:
        return "deadline"
    try:
        return _timed(lambda: _no_grad(fn), repeats, device), _timed(lambda: fn().sum().backward(), repeats, device)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return "out of memory"


def _no_grad(fn):
    import torch

    with torch.no_grad():
        return fn()


def _mib(value) -> str:
    return "-" if value is None else f"{value:.0f} MiB"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry", action="store_true", help="CPU tensors under Triton's interpreter, tiny shapes")
    ap.add_argument("--lengths", default=None, help="comma-separated token counts (default 4096,16384,65536)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget-seconds", type=float, default=420.0, help="the whole check's deadline (default 420)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/gpu.json"))
    args = ap.parse_args(argv)
    import gpu_paths
    import gpu_train

    clock = gpu_train.Clock(args.budget_seconds)  # before the imports, which take seconds of the budget too
    if args.dry:  # read when @triton.jit decorates: before the kernels' module is imported
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from attnlab.io import write_json
    from attnlab.site.triton import relu_sigmoid_kernels as site_triton_kernels

    if args.dry != site_triton_kernels.INTERPRETED:
        sys.exit("the kernels were imported before --dry could choose the interpreter: run gpu.py as a script")
    if not args.dry and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --dry to check the script on CPU under Triton's interpreter")
    device = torch.device("cpu" if args.dry else "cuda")
    lengths = [int(x) for x in (args.lengths or ("48" if args.dry else "4096,16384,65536")).split(",")]
    dtype = torch.float32 if args.dry else torch.bfloat16  # the interpreter's bf16 products are wrong in 3.6
    fix = site_triton_kernels.interpreter_loop_bounds() if args.dry else contextlib.nullcontext()
    with fix:
        print("| kernel | mask | out | dq | dk | dv |")
        checks = exactness(device, args.dry)
        print("| tokens | variant | forward | forward+backward | forward peak | forward+backward peak |")
        timings = speed(lengths, device, dtype, 1 if args.dry else args.repeats, clock)
    print("| command | largest difference from the CPU | status |")
    paths = gpu_paths.commands(device, clock)
    print("| study | run | parameters | tokens per step | precision | step | tokens/s | peak | status |")
    steps = gpu_train.training_steps(device, args.dry, clock)
    print("| Reverse arm | steps | training | " + " | ".join(f"{m:g}x" for m in gpu_train.MULTIPLES) + " | status |")
    reverse = gpu_train.reverse(device, args.dry, clock)
    result = {
        "date": datetime.date.today().isoformat(),
        "dry": args.dry,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "dtype": str(dtype).removeprefix("torch."),
        "exactness": checks,
        "speed": timings,
        "commands": paths,
        "training step": steps,
        "reverse": reverse,
        "budget seconds": args.budget_seconds,
        "seconds": clock.elapsed(),
        "dry shapes": gpu_train.dry_shapes() if args.dry else None,
        "not built": [],
    }
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
