"""Training-step time of the own decoder per row map, as ratios against the softmax step in the same
run, and long-context evaluation time and peak memory.

    python benchmarks/train.py [--threads 2] [--rounds 5] [--batch 8] [--context 256]
                               [--eval-lengths 4096,16384,65536] [--out benchmarks/results/train.json]

Training step: a 6-layer, 256-wide decoder (4 heads of 64, GELU FFN 1024, RoPE, byte vocabulary 257)
at context ``--context`` (256; the long-context target is at 2048), float32, one AdamW step on ``--batch``
random sequences: forward, cross-entropy, backward, clipping, step. Variants:

- ``softmax``: plain softmax, which the decoder runs through ``F.scaled_dot_product_attention`` (the
  baseline);
- ``softmax (site)``: the same map through the attnlab site (``softmax_t1``): what a softmax costs
  whenever an observer, a probe or a scaler needs the scores;
- ``entmax_a1.5``, ``relu_p4_b0`` (normalized ReLU^4) and ``asentmax`` (the adaptive scaler with
  alpha-entmax 1.5, seed 001 §4.1).

Variants run round-robin after an untimed warm-up round; in each round every variant takes ``--reps``
steps back to back and its best is kept; the headline ratio is the median over rounds of best /
softmax best in that round (the machine is shared and noisy; ratios taken side by side are not).

Evaluation: for each length in ``--eval-lengths`` and each map (softmax, entmax_a1.5, relu_p4_b0), a
fresh Python process builds a 2-layer 128-wide decoder (4 heads, RoPE, context 256 as trained) with
``model.block = --eval-block`` (the decoder thins blocks further so that one holds at most 2^24 scores:
64 query rows at 65,536 keys and 4 heads), resets the resident-set high-water mark (/proc/self/clear_refs),
runs one ``torch.no_grad`` forward of one random sequence, and reports the time, the peak resident set
(VmHWM) and its growth over the resident set before the forward.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from attnlab.io import write_json
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder, loss
from attnlab.perf import tune_malloc
from attnlab.train.optim import make_optimizer

STEP_MODEL = dict(vocab=257, context=256, layers=6, heads=4, d_model=256, positions="rope")
VARIANTS = {
    "softmax": {"rowmap": "softmax"},
    "softmax (site)": {"rowmap": "softmax_t1"},
    "entmax_a1.5": {"rowmap": "entmax_a1.5"},
    "relu_p4_b0": {"rowmap": "relu_p4_b0"},
    "asentmax": {"rowmap": "entmax_a1.5", "scaler": "adaptive"},
}
EVAL_MODEL = dict(vocab=257, context=256, layers=2, heads=4, d_model=128, positions="rope")
EVAL_MAPS = ("softmax", "entmax_a1.5", "relu_p4_b0")
TARGETS = {"entmax_a1.5": 3.0, "asentmax": 3.0, "relu_p4_b0": 1.5, "peak_eval_gib": 4.0}


def step_fn(variant: dict, batch: int, context: int, seed: int = 0):
    """A closure that takes one training step of the benchmark model with ``variant``'s map."""
    torch.manual_seed(seed)
    model = Decoder(ModelConfig(**{**STEP_MODEL, "context": context}, **variant)).train()
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.95))
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 257, (batch, context + 1), generator=g)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        value = loss(model(ids[:, :-1]), ids[:, 1:])
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(value.detach())

    return step


def bench_steps(batch: int, rounds: int, reps: int, context: int) -> dict:
    steps = {name: step_fn(v, batch, context) for name, v in VARIANTS.items()}
    for fn in steps.values():
        fn()
    best: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            best[name].append(min(times))
    out = {}
    for name, times in best.items():
        ratios = [t / s for t, s in zip(times, best["softmax"])]
        out[name] = {
            "best_s": min(times),
            "median_round_ratio": statistics.median(ratios),
            "ratio_range": [min(ratios), max(ratios)],
            "rounds_s": times,
        }
    return out


EVAL = """
import sys, time, torch
from attnlab.model.config import ModelConfig
from attnlab.model.decoder import Decoder
from attnlab.perf import peak_rss, reset_peak_rss, tune_malloc
tune_malloc()
torch.set_num_threads(int(sys.argv[4]))
tokens, rowmap, block = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cfg = ModelConfig(**eval(sys.argv[5]), rowmap=rowmap, block=block)
torch.manual_seed(0)
model = Decoder(cfg).eval()
ids = torch.randint(0, cfg.vocab, (1, tokens), generator=torch.Generator().manual_seed(0))
reset, before = reset_peak_rss()
t0 = time.perf_counter()
with torch.no_grad():
    logits = model(ids)
seconds = time.perf_counter() - t0
assert bool(torch.isfinite(logits).all())
print(int(reset), before, peak_rss(), seconds)
"""


def bench_eval(tokens: int, rowmap: str, block: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", EVAL, str(tokens), rowmap, str(block), str(threads), repr(EVAL_MODEL)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reset, before, after, seconds = int(out[-4]), int(out[-3]), int(out[-2]), float(out[-1])
    return {
        "tokens": tokens,
        "rowmap": rowmap,
        "block": block,
        "seconds": seconds,
        "rss_before_mib": before / 1024,
        "peak_rss_mib": after / 1024,
        "peak_rss_growth_mib": (after - before) / 1024,
        "high_water_reset": bool(reset),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2, help="back-to-back steps per variant and round (best kept)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per training step")
    ap.add_argument("--context", type=int, default=256, help="training context of the step model")
    ap.add_argument("--eval-lengths", default="4096,16384,65536", help="comma-separated evaluation lengths")
    ap.add_argument(
        "--eval-block",
        type=int,
        default=512,
        help="model.block: query rows per attention block at most (default 512, the config default)",
    )
    ap.add_argument("--no-steps", action="store_true", help="skip the training-step timings")
    ap.add_argument("--no-eval", action="store_true", help="skip the evaluation runs")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/train.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    malloc = "tuned" if tune_malloc() else "default"
    steps = {} if args.no_steps else bench_steps(args.batch, args.rounds, args.reps, args.context)
    evals = (
        []
        if args.no_eval
        else [
            bench_eval(n, m, args.eval_block, args.threads)
            for n in (int(x) for x in args.eval_lengths.split(","))
            for m in EVAL_MAPS
        ]
    )
    payload = {
        "threads": args.threads,
        "rounds": args.rounds,
        "reps": args.reps,
        "batch": args.batch,
        "context": args.context,
        "torch": torch.__version__,
        "malloc": malloc,
        "date": datetime.date.today().isoformat(),
        "step_model": STEP_MODEL,
        "eval_model": EVAL_MODEL,
        "targets": TARGETS,
        "baseline": "softmax step through scaled_dot_product_attention, same model shape, same rounds",
        "steps": steps,
        "eval": evals,
    }
    write_json(args.out, payload)
    if steps:
        print(
            f"training step / softmax (SDPA) step, 6 x 256 decoder, context {args.context}, batch {args.batch}, "
            f"float32, {args.threads} threads, {malloc} malloc, median of {args.rounds} interleaved rounds of "
            f"best-of-{args.reps}"
        )
        print("| map | best step | / softmax (median round) | range over rounds |")
        print("|---|---|---|---|")
        for name, r in steps.items():
            lo, hi = r["ratio_range"]
            print(f"| {name} | {r['best_s'] * 1000:.0f} ms | {r['median_round_ratio']:.2f}x | {lo:.2f}-{hi:.2f}x |")
    if evals:
        print(
            f"evaluation, 2 x 128 decoder, one sequence, no_grad, block <= {args.eval_block} rows and 2^24 scores, "
            "fresh process"
        )
        print("| tokens | map | time | peak RSS | growth |")
        print("|---|---|---|---|---|")
        for r in evals:
            print(
                f"| {r['tokens']} | {r['rowmap']} | {r['seconds']:.1f} s | {r['peak_rss_mib']:.0f} MiB | "
                f"+{r['peak_rss_growth_mib']:.0f} MiB |"
            )
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
