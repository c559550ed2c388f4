"""Time and peak memory of one ``attnlab lengthgen`` evaluation row at long lengths, per variant.

    python benchmarks/lengthgen_long.py [--maps softmax ssmax_learned entmax_a1.5 asentmax topk_k32]
        [--lengths 65536] [--task mqmtar] [--train-len 64] [--threads 2]
        [--out benchmarks/results/lengthgen_long.json]

For each length and variant, a fresh Python process builds the decoder that ``attnlab lengthgen`` trains
for that variant under the smoke budget (2 layers, 64 wide, 4 heads, NAPE, context ``--train-len``),
resets the resident-set high-water mark, and scores one task row of that length with
``lengthgen.score``: the very path of the benchmark, with the weight observer that records entropy and
support, so every map runs through the attnlab site. The weights are the initial ones: memory and time
do not depend on training, and a benchmark should not wait for one. The bound to meet is the model
issue's: at most 4 GiB peak resident set at 65,536 tokens.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

import torch

from attnlab.io import write_json

BOUND_GIB = 4.0
ROW = """
import sys, time, torch
from attnlab.analyses import lengthgen
from attnlab.model import Decoder
from attnlab.perf import peak_rss, reset_peak_rss, tune_malloc
from attnlab.tasks import TASKS
tune_malloc()
torch.set_num_threads(int(sys.argv[4]))
task, train_len, name, length = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[5])
cfg = lengthgen.LengthgenConfig(task=task, maps=(name,), train_len=train_len)
torch.manual_seed(0)
model = Decoder(lengthgen.run_config(cfg, name, TASKS[task].vocab_size).model)
reset, before = reset_peak_rss()
t0 = time.perf_counter()
result = lengthgen.score(model, TASKS[task], length, 1, seed=0)
seconds = time.perf_counter() - t0
assert all(e == e for e in result["entropy"]), result
print(int(reset), before, peak_rss(), seconds, max(result["support"]))
"""


def bench_row(task: str, train_len: int, name: str, length: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ROW, task, str(train_len), name, str(threads), str(length)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reset, before, after, seconds, support = int(out[-5]), int(out[-4]), int(out[-3]), float(out[-2]), float(out[-1])
    return {
        "variant": name,
        "tokens": length,
        "seconds": seconds,
        "rss_before_mib": before / 1024,
        "peak_rss_mib": after / 1024,
        "peak_rss_growth_mib": (after - before) / 1024,
        "high_water_reset": bool(reset),
        "mean_support_max_layer": support,
        "within_bound": after / 2**20 <= BOUND_GIB,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maps", nargs="+", default=["softmax", "ssmax_learned", "entmax_a1.5", "asentmax", "topk_k32"])
    ap.add_argument("--lengths", type=int, nargs="+", default=[65536])
    ap.add_argument("--task", default="mqmtar")
    ap.add_argument("--train-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/lengthgen_long.json"))
    args = ap.parse_args(argv)
    rows = []
    print(f"one lengthgen evaluation row ({args.task}), smoke-budget decoder, {args.threads} threads, fresh process")
    print("| tokens | variant | time | peak RSS | growth | within 4 GiB |")
    print("|---|---|---|---|---|---|")
    for length in args.lengths:
        for name in args.maps:
            r = bench_row(args.task, args.train_len, name, length, args.threads)
            rows.append(r)
            print(
                f"| {length} | {name} | {r['seconds']:.1f} s | {r['peak_rss_mib']:.0f} MiB | "
                f"+{r['peak_rss_growth_mib']:.0f} MiB | {r['within_bound']} |",
                flush=True,
            )
            write_json(
                args.out,
                {
                    "task": args.task,
                    "train_len": args.train_len,
                    "threads": args.threads,
                    "torch": torch.__version__,
                    "date": datetime.date.today().isoformat(),
                    "bound_gib": BOUND_GIB,
                    "rows": rows,
                },
            )
    print(f"wrote {args.out}")
    return {"rows": rows}


if __name__ == "__main__":
    main()
