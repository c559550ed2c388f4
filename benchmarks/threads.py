"""Training speed of a small decoder against torch's thread count, on a quiet and on a loaded machine.

    python benchmarks/threads.py [--steps 8] [--rounds 3] [--out benchmarks/results/threads.json]

The model is the README's ``examples/tiny.yaml`` shape (4 layers x 4 heads x 128, RoPE, context 128, batch 16,
byte vocabulary), one AdamW step on random tokens: forward, cross-entropy, backward, clipping, step. Each
measurement runs in a fresh process with ``torch.set_num_threads(T)`` for T = 1 and T = every core, and
reports tokens per second over ``--steps`` steps after two untimed ones. The load is L spinning Python
processes (``while True: pass``) started before the measurement and killed after it, for L = 0 (quiet),
1 and every core; the rounds alternate the settings so that a change of machine load hits all of them. The
headline is, per load, the median over rounds of tokens/s with every core over tokens/s with one thread,
and what ``attnlab.perf.default_threads`` picks under that load (read in the measuring process, ``--settle``
seconds after the spinners start).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from attnlab.io import write_json

STEP = """
import sys, time, torch
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.perf import default_threads, tune_malloc
from attnlab.train.optim import make_optimizer
tune_malloc()
picked = default_threads()
torch.set_num_threads(int(sys.argv[1]))
steps = int(sys.argv[2])
torch.manual_seed(0)
model = Decoder(ModelConfig(vocab=257, context=128, layers=4, heads=4, d_model=128, positions="rope")).train()
opt = make_optimizer(model, 3e-3, 0.1, (0.9, 0.95))
ids = torch.randint(0, 257, (16, 129), generator=torch.Generator().manual_seed(0))
def step():
    opt.zero_grad(set_to_none=True)
    value = loss(model(ids[:, :-1]), ids[:, 1:])
    value.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
for _ in range(2):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
print(picked, 16 * 128 * steps / (time.perf_counter() - t0))
"""


def measure(threads: int, steps: int) -> tuple[int, float]:
    """(default_threads() as the process saw it, tokens/s) of one fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", STEP, str(threads), str(steps)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[-2]), float(out[-1])


def spinners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=2.0, help="seconds the spinners run before measuring")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "threads.json")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    loads = sorted({0, 1, cores})
    speed: dict[tuple[int, int], list[float]] = {}
    picked: dict[int, list[int]] = {}
    for _ in range(args.rounds):
        for load in loads:
            procs = spinners(load)
            try:
                time.sleep(args.settle if load else 0)
                for threads in (1, cores):
                    seen, rate = measure(threads, args.steps)
                    speed.setdefault((load, threads), []).append(rate)
                    picked.setdefault(load, []).append(seen)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    lines = []
    for load in loads:
        ratios = [a / b for a, b in zip(speed[(load, cores)], speed[(load, 1)])]
        lines.append(
            {
                "spinning_processes": load,
                "cores": cores,
                "tokens_per_s_1_thread": statistics.median(speed[(load, 1)]),
                f"tokens_per_s_{cores}_threads": statistics.median(speed[(load, cores)]),
                "all_cores_over_one_thread": statistics.median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
                "default_threads_picked": sorted(set(picked[load])),
            }
        )
        print(
            f"load {load} spinning on {cores} cores: 1 thread {lines[-1]['tokens_per_s_1_thread']:,.0f} tokens/s, "
            f"{cores} threads {lines[-1][f'tokens_per_s_{cores}_threads']:,.0f} tokens/s (x"
            f"{lines[-1]['all_cores_over_one_thread']:.2f}, rounds {min(ratios):.2f}-{max(ratios):.2f}); "
            f"default_threads picked {lines[-1]['default_threads_picked']}"
        )
    write_json(
        args.out,
        {
            "date": datetime.datetime.now(datetime.UTC).isoformat(),
            "steps": args.steps,
            "rounds": args.rounds,
            "settle_s": args.settle,
            "results": lines,
        },
    )
    print(f"wrote: {args.out}")


if __name__ == "__main__":
    main()
