"""Hooked forwards against the vanilla eager forward on a randomly initialised Llama-shaped model, or on a
real pretrained one.

    python benchmarks/hooks.py [--threads 2] [--rounds 3] [--reps 2] [--tokens 2048] [--peak-tokens 4096]
                               [--model NAME] [--out benchmarks/results/hooks.json]

The model is transformers' Llama at 8 layers, 512 hidden, 8 heads (no grouping), 1376 MLP, an 8192-token
vocabulary, random weights, float32, ``attn_implementation="eager"``; or, with ``--model``, a real model
as ``--model`` takes it (a fetched name such as smollm2, a .gguf file or a folder), float32, eager. One
prompt of ``--tokens`` random ids, batch 1, ``torch.no_grad``. Timed, one forward each:

- ``eager``: the model's own eager forward, the baseline;
- ``observed no-op``: ``hooks.observed`` with an observer that does nothing: the cost of routing the
  attention through the attnlab site (query blocks of 512) alone;
- ``audit every=K``: what ``attnlab audit`` does per prompt: ``analyses.readout.read_rows`` with
  one table at b = 0 (p = 2, 4, 8, 16) written as Parquet to a temporary folder; every K-th query
  position and the last one are diagnosed, for every layer and head. Creating the writer and closing it
  (flush, file rename) is inside the timed region: with one prompt the audit pays it once. K = 16 is the
  command's default; K = 1 diagnoses every row;
- ``substituted <recipe>``: ``hooks.substituted(model, recipe)`` on every head of every layer.

Variants are run round-robin after an untimed warm-up round, so machine noise hits all alike: in each
round every variant is called ``--reps`` times back to back and its best call kept (audits with K < 4,
some ten eager forwards each, are called once per round and not warmed up, to keep the run to a few
minutes). The headline is the best time of each variant over all rounds divided by the best eager time;
the median over rounds of the per-round ratio is beside it (on a shared machine the two disagree when
another process steals a core: trust the lower). The warm-up round also checks that the observed
forward's logits equal the eager ones bit for bit.

Peak memory: for each of eager, audit every=16 and audit every=1 at ``--peak-tokens``, a fresh Python
process builds the model, resets the resident-set high-water mark (writing 5 to /proc/self/clear_refs,
Linux >= 4.0: building the model peaks above its resting resident set, which would otherwise mask the
forward's own peak), reads its resident set just before the forward (/proc/self/statm) and reports the
high-water mark after it (VmHWM in /proc/self/status), and the growth over the resident set before.
``ru_maxrss`` is kept in the JSON but not used: the kernel folds the parent's resident set at
fork/exec into the child's ``ru_maxrss`` and clear_refs does not reset that part, so a child of this
benchmark (about 2 GiB by the time the peaks run) reported 2041 MiB for every variant.
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import torch

from attnlab import hooks
from attnlab.analyses import readout
from attnlab.diagnostics import RowOptions
from attnlab.io import write_json
from attnlab.perf import tune_malloc

RECIPES = ("relu_p4_b1", "sigmoid_b0", "entmax_a1.5")
EVERY = (16, 1)
CONFIG = dict(
    vocab_size=8192,
    hidden_size=512,
    intermediate_size=1376,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=8,
    max_position_embeddings=8192,
)
OPTIONS = dict(p=(2, 4, 8, 16), b=0.0)
SLOW_EVERY = 4  # audits sampling more densely than this are timed once per round and not warmed up
TARGETS = {"audit every=16": 2.0, "substituted": 1.3, "peak_audit_mib": 2048}


def build(seed: int = 0, name: str | None = None) -> torch.nn.Module:
    """The random Llama of CONFIG, or the real model ``name`` (as ``--model`` takes it)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    if name is not None:
        return hooks.load_model(name, tokenizer=False)[0]
    torch.manual_seed(seed)
    cfg = LlamaConfig(**CONFIG)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()


def prompt(tokens: int, seed: int = 0, vocab: int = CONFIG["vocab_size"]) -> torch.Tensor:
    return torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(seed))


def audit_forward(model: torch.nn.Module, ids: torch.Tensor, every: int, folder: Path) -> int:
    """One prompt of ``attnlab audit``: returns the number of rows written."""
    reading = readout.Reading(tuple(ids[0].tolist()), readout.select_queries(f"every:{every}", ids.shape[1]))
    paths = readout.read_rows(
        model,
        [reading],
        {f"every{every}": RowOptions.make(**OPTIONS)},
        folder,
        config={},
        device=str(ids.device),
        progress=False,
    )
    return pq.ParquetFile(paths[f"every{every}"]).metadata.num_rows


PEAK = """
import resource, sys, tempfile, torch
sys.path.insert(0, sys.argv[4])
from hooks import audit_forward, build, prompt
from attnlab.perf import peak_rss, reset_peak_rss, tune_malloc
tune_malloc()
torch.set_num_threads(int(sys.argv[3]))
tokens, variant = int(sys.argv[1]), sys.argv[2]
model, ids = build(), prompt(tokens)
with tempfile.TemporaryDirectory() as folder:
    reset, before = reset_peak_rss()  # building the model peaks above its resting resident set
    if variant == "eager":
        with torch.no_grad():
            model(input_ids=ids)
    else:
        audit_forward(model, ids, int(variant), folder)
    print(int(reset), before, peak_rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak(variant: str, tokens: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PEAK, str(tokens), variant, str(threads), str(Path(__file__).resolve().parent)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reset, before, after, maxrss = (int(v) for v in out[-4:])
    return {
        "tokens": tokens,
        "rss_before_mib": before / 1024,
        "peak_rss_mib": after / 1024,
        "peak_rss_growth_mib": (after - before) / 1024,
        "high_water_reset": bool(reset),
        "ru_maxrss_mib": maxrss / 1024,
    }


def variants(
    model: torch.nn.Module, ids: torch.Tensor, folder: Path, every: tuple[int, ...], recipes: tuple[str, ...]
) -> dict[str, Callable[[], object]]:
    def eager():
        with torch.no_grad():
            return model(input_ids=ids).logits

    def noop():
        with hooks.observed(model, lambda block: None), torch.no_grad():
            return model(input_ids=ids).logits

    def audited(k):
        return lambda: audit_forward(model, ids, k, folder)

    def substituted(name):
        def run():
            with hooks.substituted(model, name), torch.no_grad():
                return model(input_ids=ids).logits

        return run

    return {
        "eager": eager,
        "observed no-op": noop,
        **{f"audit every={k}": audited(k) for k in every},
        **{f"substituted {name}": substituted(name) for name in recipes},
    }


def bench(
    tokens: int, rounds: int, reps: int, every: tuple[int, ...], recipes: tuple[str, ...], name: str | None = None
) -> dict:
    model = build(name=name)
    ids = prompt(tokens, vocab=model.config.vocab_size)
    with tempfile.TemporaryDirectory() as folder:
        runs = variants(model, ids, Path(folder), every, recipes)
        slow = {f"audit every={k}" for k in every if k < SLOW_EVERY}
        warm = {name: run() for name, run in runs.items() if name not in slow}  # untimed warm-up round
        identical = bool(torch.equal(warm["eager"], warm["observed no-op"]))
        del warm
        times: dict[str, list[float]] = {name: [] for name in runs}
        rows: dict[str, int] = {}
        for _ in range(rounds):
            for name, run in runs.items():
                best = math.inf
                for _ in range(1 if name in slow else reps):
                    t0 = time.perf_counter()
                    out = run()
                    best = min(best, time.perf_counter() - t0)
                times[name].append(best)
                if isinstance(out, int):
                    rows[name] = out
                del out
    base = times["eager"]
    results = {}
    for name, ts in times.items():
        results[name] = {
            "best_s": min(ts),
            "round_best_s": ts,
            "ratio": min(ts) / min(base),
            "median_round_ratio": statistics.median(t / b for t, b in zip(ts, base, strict=True)),
            "calls_per_round": 1 if name in slow else reps,
        }
        if name in rows:
            results[name]["rows_written"] = rows[name]
    return {"tokens": tokens, "observed_logits_bit_identical": identical, "variants": results}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2, help="back-to-back calls per variant and round (best kept)")
    ap.add_argument("--tokens", type=int, default=2048, help="prompt length of the timed forwards")
    ap.add_argument("--peak-tokens", type=int, default=4096, help="prompt length of the peak-memory runs")
    ap.add_argument("--every", default=",".join(map(str, EVERY)), help="comma-separated audit sampling steps")
    ap.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated row maps to substitute")
    ap.add_argument("--no-peak", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument(
        "--model",
        default=None,
        help="a real model instead of the random Llama, e.g. smollm2 "
        "(attnlab fetch smollm2); the peak runs stay on the random one",
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/hooks.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    malloc = "tuned" if tune_malloc() else "default"
    every = tuple(int(k) for k in args.every.split(","))
    recipes = tuple(args.recipes.split(","))
    timed = bench(args.tokens, args.rounds, args.reps, every, recipes, args.model)
    peaks = (
        {}
        if args.no_peak
        else {
            name: peak(variant, args.peak_tokens, args.threads)
            for name, variant in [("eager", "eager"), *((f"audit every={k}", str(k)) for k in every)]
        }
    )
    payload = {
        "threads": args.threads,
        "rounds": args.rounds,
        "reps": args.reps,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "malloc": malloc,
        "date": datetime.date.today().isoformat(),
        "model": {"type": "llama", **CONFIG} if args.model is None else {"name": args.model},
        "dtype": "float32",
        "baseline": "eager forward, same model and prompt, same rounds",
        "audit_options": {**OPTIONS, "every": list(every)},
        "targets": TARGETS,
        "timed": timed,
        "peak": peaks,
    }
    write_json(args.out, payload)
    what = "Llama 8 x 512 random weights" if args.model is None else args.model
    print(
        f"forward time / eager forward time, {what}, {args.tokens} tokens, float32, "
        f"{args.threads} threads, {malloc} malloc, {args.rounds} interleaved rounds of best-of-{args.reps} "
        f"(audit every<{SLOW_EVERY}: 1 call per round)"
    )
    print("| forward | best | / eager (best) | / eager (median round) | rows diagnosed |")
    print("|---|---|---|---|---|")
    for name, r in timed["variants"].items():
        print(
            f"| {name} | {r['best_s']:.2f} s | {r['ratio']:.2f}x | {r['median_round_ratio']:.2f}x | "
            f"{r.get('rows_written', '')} |"
        )
    print(f"observed no-op logits bit-identical to eager: {timed['observed_logits_bit_identical']}")
    if peaks:
        print(f"peak resident memory, fresh process, {args.peak_tokens} tokens")
        print("| forward | RSS before | peak RSS | growth |")
        print("|---|---|---|---|")
        for name, r in peaks.items():
            print(
                f"| {name} | {r['rss_before_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB | "
                f"+{r['peak_rss_growth_mib']:.0f} MiB |"
            )
    print(f"wrote {args.out}")
    return payload


if __name__ == "__main__":
    main()
