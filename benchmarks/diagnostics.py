"""Diagnostics throughput: rows per second of the full per-row bundle against one torch.softmax pass.

    python benchmarks/diagnostics.py [--threads 2] [--rounds 7] [--out benchmarks/results/diagnostics.json]

The bundle is ``row_stats`` with its defaults: status, margins, S_p at p = 2, 4, 8, 16, p*, entropy and
support under softmax, Lambda_n and the contact point, sink mass, all in float64. For each key count
the same float32 rows (N(0, 1), causal mask over the last query block) go through ``torch.softmax`` and
through ``row_stats``, one block of the engine's size (``rows.CHUNK_VALUES`` scores, as the streaming
writer hands it over). Each round times both side by side (best of --reps each); the figure is the
median over rounds of the ratio, since shared machines drift. The naive baseline calls ``row_stats``
one row at a time, as a per-row script would (timed on a few rows and scaled). Peak memory: a fresh process builds the
same rows and mask, runs the bundle on one row (the
first call lazily imports some 500 modules, sympy among them, which would otherwise be charged to the
bundle), resets its resident-set high-water mark (writing 5 to /proc/self/clear_refs, Linux >= 4.0, as
``benchmarks/hooks.py`` does), reads its resident set (/proc/self/statm), runs one bundle and reports the
high-water mark (VmHWM in /proc/self/status) and its growth over the resident set before. ``ru_maxrss``
is not used: the kernel folds the parent's resident set at fork/exec into it and clear_refs does not
reset that part, so every shape read the same 403 MiB.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from attnlab.diagnostics import row_stats
from attnlab.diagnostics.rows import CHUNK_VALUES
from attnlab.io import write_json
from attnlab.perf import tune_malloc
from attnlab.rowmaps import kernel

SHAPES = tuple((CHUNK_VALUES // keys, keys) for keys in (1024, 8192, 32768))

PEAK = """
import sys, torch
sys.path.insert(0, sys.argv[4])
from diagnostics import inputs
from attnlab.diagnostics import row_stats
from attnlab.perf import peak_rss, reset_peak_rss, tune_malloc
tune_malloc()
torch.set_num_threads(int(sys.argv[3]))
z, mask = inputs(int(sys.argv[1]), int(sys.argv[2]))
row_stats(z[:1], None if mask is None else mask[:1])  # its first call imports sympy via torch, ~50 MiB
reset, before = reset_peak_rss()  # the high-water mark then holds the bundle's peak alone
row_stats(z, mask)
print(int(reset), before, peak_rss())
"""


def _best(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def inputs(rows: int, keys: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    z = torch.randn(rows, keys, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(rows, keys, dtype=torch.bool).tril(keys - rows) if rows <= keys else None
    return z, mask


def bench(rows: int, keys: int, rounds: int, reps: int, naive_rows: int, threads: int) -> dict:
    z, mask = inputs(rows, keys)
    softs, fulls = [], []
    for _ in range(rounds):
        softs.append(
            _best(lambda: torch.softmax(z.masked_fill(~mask, float("-inf")) if mask is not None else z, -1), reps)
        )
        fulls.append(_best(lambda: row_stats(z, mask), reps))
    ratios = [f / s for f, s in zip(fulls, softs)]
    soft, full = statistics.median(softs), statistics.median(fulls)
    naive = (
        _best(
            lambda: [row_stats(z[i : i + 1], None if mask is None else mask[i : i + 1]) for i in range(naive_rows)], 1
        )
        * rows
        / naive_rows
    )
    out = subprocess.run(
        [sys.executable, "-c", PEAK, str(rows), str(keys), str(threads), str(Path(__file__).resolve().parent)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reset, before, after = (int(v) for v in out[-3:])
    return {
        "rows": rows,
        "keys": keys,
        "softmax_s": soft,
        "bundle_s": full,
        "naive_s": naive,
        "bundle_ratio": statistics.median(ratios),
        "bundle_ratio_range": [min(ratios), max(ratios)],
        "naive_ratio": naive / soft,
        "rows_per_s": rows / full,
        "input_mib": z.numel() * 4 / 2**20,
        "peak_rss_mib": after / 1024,
        "peak_rss_growth_mib": (after - before) / 1024,
        "high_water_reset": bool(reset),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3, help="timings per round; each round keeps the best")
    ap.add_argument("--naive-rows", type=int, default=8, help="rows timed one by one for the naive loop")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/diagnostics.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tune_malloc()
    results = [bench(r, k, args.rounds, args.reps, args.naive_rows, args.threads) for r, k in SHAPES]
    print(
        f"row_stats bundle vs one torch.softmax pass over the same float32 rows ({args.threads} threads, "
        f"median ratio over {args.rounds} rounds of best-of-{args.reps}; {kernel.status()})"
    )
    print("| keys | rows | bundle / softmax (range) | naive per-row loop / softmax | rows/s | peak RSS (growth) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        lo, hi = r["bundle_ratio_range"]
        print(
            f"| {r['keys']} | {r['rows']} | {r['bundle_ratio']:.1f}x ({lo:.1f}-{hi:.1f}) | {r['naive_ratio']:.0f}x | "
            f"{r['rows_per_s']:.0f} | {r['peak_rss_mib']:.0f} MiB (+{r['peak_rss_growth_mib']:.0f}) |"
        )
    write_json(
        args.out,
        {
            "threads": args.threads,
            "rounds": args.rounds,
            "reps": args.reps,
            "kernel": kernel.status(),
            "results": results,
        },
    )
    print(f"wrote {args.out}")
    return {"results": results}


if __name__ == "__main__":
    main()
