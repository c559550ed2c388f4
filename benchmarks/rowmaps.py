"""Row-map speed as ratios against torch.softmax on the same tensors, in the same run.

    python benchmarks/rowmaps.py [--threads 2] [--rounds 15] [--out benchmarks/results/rowmaps.json]

For each shape (rows x keys, 2^19 float32 values by default), in every round and for every candidate,
torch.softmax and then the candidate are each called ``--reps`` times back to back (the steady state
of a layer calling the same map again and again) and their best times are divided; the reported
figure is the median of that ratio over rounds: shared machines drift, ratios taken side by side do
not. Rows are N(0, scale^2).

``--malloc tuned`` (the default) raises glibc's trim and mmap thresholds with mallopt before timing:
with the defaults, every call that frees a few row-sized buffers hands the pages back to the OS and
the next call page-faults them in again, which costs more than the arithmetic at these sizes and
punishes each extra buffer (measured here on an early ReLU^16 with more buffers: 11-21x softmax by
default, 1.7-2.2x tuned).
PyTorch's CPU performance guide recommends jemalloc or tcmalloc for the same reason; set
MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ in your environment to get the same effect. The `entmax` package is
timed as the reference point
the issue quotes; attnlab itself never imports it.

alpha-entmax runs on the compiled kernel where it builds (``attnlab.rowmaps.kernel``; the output says which);
``ATTNLAB_KERNEL=0 python benchmarks/rowmaps.py --out benchmarks/results/rowmaps_torch_ops.json`` times the
torch-ops path that GPUs and machines without a C compiler use.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab import rowmaps
from attnlab.perf import tune_malloc
from attnlab.rowmaps import kernel

SHAPES = ((512, 1024), (64, 8192), (8, 65536))
MAPS = (
    "softmax",
    "entmax_a1.5",
    "entmax_a1.25",
    "sparsemax",
    "relu_p2_b0",
    "relu_p4_b0",
    "relu_p16_b0",
    "sigmoid_b0",
    "wortsman_p2_sqrtL",
    "ssmax_s0.43",
)


def _package_candidates() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    try:
        import entmax
    except ImportError:
        return {}
    return {
        "pkg:entmax15": lambda z: entmax.entmax15(z, dim=-1),
        "pkg:entmax_bisect_a1.5": lambda z: entmax.entmax_bisect(z, 1.5, dim=-1),
        "pkg:entmax_bisect_a1.25": lambda z: entmax.entmax_bisect(z, 1.25, dim=-1),
    }


def _timer(fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, grad: torch.Tensor | None):
    leaf = z.detach().clone().requires_grad_(grad is not None)

    def once() -> float:
        leaf.grad = None
        t0 = time.perf_counter()
        out = fn(leaf)
        if grad is not None:
            out.backward(grad)
        return time.perf_counter() - t0

    def best_of(reps: int) -> float:
        return min(once() for _ in range(reps))

    return best_of


def bench_shape(rows: int, keys: int, names: list[str], rounds: int, reps: int, scale: float, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, keys, generator=gen) * scale
    grad = torch.randn(rows, keys, generator=gen)
    candidates = {name: rowmaps.get(name) for name in names}
    candidates.update(_package_candidates())
    base = {
        "fwd": _timer(lambda t: torch.softmax(t, -1), z, None),
        "fwd_bwd": _timer(lambda t: torch.softmax(t, -1), z, grad),
    }
    timers = {
        (name, mode): _timer(fn, z, grad if mode == "fwd_bwd" else None)
        for name, fn in candidates.items()
        for mode in ("fwd", "fwd_bwd")
    }
    for run in [*base.values(), *timers.values()]:
        run(2)
    ratios: dict[tuple[str, str], list[float]] = {key: [] for key in timers}
    base_times: dict[str, list[float]] = {"fwd": [], "fwd_bwd": []}
    for _ in range(rounds):
        for (name, mode), run in timers.items():
            b = base[mode](reps)
            base_times[mode].append(b)
            ratios[(name, mode)].append(run(reps) / b)
    result = {
        "rows": rows,
        "keys": keys,
        "softmax_us": {mode: 1e6 * min(ts) for mode, ts in base_times.items()},
        "ratios": {},
    }
    for (name, mode), rs in ratios.items():
        result["ratios"].setdefault(name, {})[mode] = statistics.median(rs)
    return result


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2)
    os.replace(tmp, path)


def table(results: list[dict]) -> str:
    names = list(results[0]["ratios"])
    head = ["map"] + [f"{r['keys']} fwd" for r in results] + [f"{r['keys']} f+b" for r in results]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        cells = [f"{r['ratios'][name]['fwd']:.1f}x" for r in results]
        cells += [f"{r['ratios'][name]['fwd_bwd']:.1f}x" for r in results]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=5, help="back-to-back calls per timing (best kept)")
    ap.add_argument("--scale", type=float, default=1.0, help="standard deviation of the score rows")
    ap.add_argument("--shapes", default=",".join(f"{r}x{k}" for r, k in SHAPES), help="comma-separated ROWSxKEYS")
    ap.add_argument("--maps", default=",".join(MAPS), help="comma-separated row-map names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--malloc", choices=("tuned", "default"), default="tuned")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/rowmaps.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    malloc = "tuned" if args.malloc == "tuned" and tune_malloc() else "default"
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    names = args.maps.split(",")
    results = [bench_shape(r, k, names, args.rounds, args.reps, args.scale, args.seed) for r, k in shapes]
    payload = {
        "threads": args.threads,
        "rounds": args.rounds,
        "reps": args.reps,
        "scale": args.scale,
        "torch": torch.__version__,
        "malloc": malloc,
        "kernel": kernel.status(),
        "baseline": "torch.softmax, same tensor, same round",
        "results": results,
    }
    write_json(args.out, payload)
    print(
        f"time / torch.softmax time (median over {args.rounds} rounds of best-of-{args.reps}, "
        f"{args.threads} threads, N(0, {args.scale:g}^2) rows, {malloc} malloc; {kernel.status()})"
    )
    print(table(results))
    print(
        "softmax itself: "
        + ", ".join(
            f"{r['keys']} keys {r['softmax_us']['fwd']:.0f} us fwd, {r['softmax_us']['fwd_bwd']:.0f} us f+b"
            for r in results
        )
    )
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
