"""Token shards against tokenizing: ``attnlab prepare``'s throughput and a run's start-up time, one session.

    python benchmarks/shards.py [--threads 1] [--rounds 5] [--max-tokens 5000000] [--tokenizer bytes]
                                [--out benchmarks/results/shards.json]

prepare: ``shards.prepare`` of the Python standard library (``*.py``) with ``--tokenizer`` (``bytes`` or a
local Hugging Face tokenizer folder) into a temporary folder, once uncapped and once at ``--max-tokens`` per
split, timed whole (listing, tokenizing, writing, fsync, rename); the figure is tokens written per second.

start-up: what a run does before its first step, with ``data.max_tokens = --max-tokens`` and tokenizing
(``data.folder`` unset) against the same cap read from the capped shards (``data.shards``): the stream
(``trainer.make_stream``), its first training batch and the evaluation batches, and separately a whole
``Trainer`` (stream, model, optimizer, run folder) for examples/tiny.yaml. The two alternate in each round,
so machine noise hits both alike; the headline ratio is the median over rounds of tokenizing / shards.
Each round also checks that both streams give the same first batch.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from attnlab.io import write_json
from attnlab.train import config as run_config
from attnlab.train.shards import prepare
from attnlab.train.trainer import Trainer, make_stream

TINY = Path(__file__).resolve().parents[1] / "examples" / "tiny.yaml"


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _stream_start(cfg) -> tuple[float, torch.Tensor]:
    def start():
        stream = make_stream(cfg)
        first = stream.train_batch(0, cfg.train.batch)[0]
        stream.val_batches(cfg.train.batch, cfg.train.eval_batches)
        return first

    return _timed(start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=5_000_000)
    ap.add_argument("--tokenizer", default="bytes")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/shards.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="attnlab-shards-bench-"))
    try:
        seconds, meta = _timed(lambda: prepare(work / "all", tokenizer=args.tokenizer))
        uncapped = {
            "seconds": seconds,
            "tokens": meta["tokens"],
            "files": meta["files"],
            "tokens_per_s": sum(meta["tokens"].values()) / seconds,
            "bytes": sum(p.stat().st_size for p in (work / "all").iterdir()),
        }
        seconds, meta = _timed(lambda: prepare(work / "capped", tokenizer=args.tokenizer, max_tokens=args.max_tokens))
        capped = {"seconds": seconds, "tokens": meta["tokens"], "tokens_per_s": sum(meta["tokens"].values()) / seconds}
        print(
            f"prepare stdlib ({args.tokenizer}): {sum(uncapped['tokens'].values()):,} tokens in "
            f"{uncapped['seconds']:.2f} s = {uncapped['tokens_per_s']:,.0f} tokens/s; capped at "
            f"{args.max_tokens:,}: {capped['seconds']:.2f} s = {capped['tokens_per_s']:,.0f} tokens/s"
        )

        base = [f"data.max_tokens={args.max_tokens}", "train.tensorboard=false"]
        cfgs = {
            "tokenize": run_config.load(TINY, [*base, f"data.tokenizer={args.tokenizer}"]),
            "shards": run_config.load(TINY, [*base, f"data.shards={work / 'capped'}"]),
        }
        times = {f"{what} {name}": [] for what in ("stream", "trainer") for name in cfgs}
        for _ in range(args.rounds):
            firsts = {}
            for name, cfg in cfgs.items():
                seconds, firsts[name] = _stream_start(cfg)
                times[f"stream {name}"].append(seconds)
                seconds, _ = _timed(
                    lambda cfg=cfg, name=name: Trainer(cfg, work / f"run-{name}", overwrite=True, progress=False)
                )
                times[f"trainer {name}"].append(seconds)
            assert torch.equal(firsts["tokenize"], firsts["shards"]), "the two streams disagree"
        ratios = {
            what: statistics.median(t / s for t, s in zip(times[f"{what} tokenize"], times[f"{what} shards"]))
            for what in ("stream", "trainer")
        }
        for what, ratio in ratios.items():
            print(
                f"start-up ({what}), max_tokens {args.max_tokens:,}: tokenizing "
                f"{statistics.median(times[f'{what} tokenize']):.3f} s, shards "
                f"{statistics.median(times[f'{what} shards']):.3f} s (medians): ratio {ratio:.1f}x"
            )
        write_json(
            args.out,
            {
                "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "threads": args.threads,
                "tokenizer": args.tokenizer,
                "rounds": args.rounds,
                "max_tokens": args.max_tokens,
                "prepare": {"uncapped": uncapped, "capped": capped},
                "seconds": times,
                "ratio_tokenize_over_shards": ratios,
            },
        )
        print(f"wrote: {args.out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
