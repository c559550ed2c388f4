"""The training parts of the GPU check (``benchmarks/gpu.py`` runs them): one optimizer step of each study's
full-budget model, and a short Reverse run of Vasylenko et al. 2025's model scored past its training length.

Models, batches and optimizers come from the studies' own plans and the project's ``Trainer``: the step timed is
``Trainer.train_step`` (every micro-batch, clipping, AdamW, the run config's precision) on random tokens for the text
studies and on the task's own stream for the synthetic ones. A study that trains several shapes is timed on its
costliest: the sinks study's deepest model, and the lengthgen study's cell of each task (Table 5 gives each task its
own model) under its headline map. The concentration study trains a Hugging Face Llama with a step of its own,
which is the one timed. ``Clock`` holds the whole check's deadline; each part asks it before each piece of work and
records what it had to leave out.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import tempfile
import time
from pathlib import Path

# The Reverse run's share of the whole budget: the parts before it stop early enough to leave it this much.
REVERSE_SHARE = 0.3
MARGIN_S = 10.0  # kept at the very end for the JSON and the process's exit
TRAIN_SHARE = 0.75  # of each Reverse arm's time after its probe: the rest scores it at every multiple
PROBE_STEPS = 4  # steps that time a Reverse arm before its run is sized; the first one also compiles
STEP_REPEATS = 3  # timed optimizer steps per study after the warm-up step, as the deadline allows
CASE_S = 30.0  # no further timed step once a study's steps took this long: a full-budget step can take many seconds
ARMS = ("asentmax", "softmax")  # Vasylenko et al. 2025 §5.1: ASEntmax (its scale on the NoPE heads) against softmax
MULTIPLES = (1, 1.5, 2, 4)  # Table 1's Reverse columns, and 1x to tell an unlearned model from one that fails to extend
LENGTHGEN_MAP = "asentmax"  # the lengthgen study's headline map, and its costliest step (entmax rows, a learned scale)
DRY = {"layers": 2, "heads": 4, "d_model": 32, "context": 32, "batch": 2}
DRY_REVERSE = {"train_len": 8, "steps": 6, "samples": 8}


class Clock:
    """The check's deadline, ``seconds`` from now; ``left(reserve=True)`` keeps the Reverse run's share aside."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.monotonic()

    def left(self, reserve: bool = False) -> float:
        spent = time.monotonic() - self.start
        return self.seconds - spent - MARGIN_S - (REVERSE_SHARE * self.seconds if reserve else 0.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def dry_shapes() -> str:
    """What the dry run shrinks, for its JSON."""
    return (
        f"each study's model cut to at most {DRY['layers']} layers and {DRY['heads']} heads, width {DRY['d_model']} "
        f"(a vector model keeps its task's) and batch {DRY['batch']}, the text models at {DRY['context']} tokens and "
        f"the lengthgen cells at their plan's shortest rows; the Reverse model the same, trained "
        f"{DRY_REVERSE['steps']} steps at {DRY_REVERSE['train_len']} source tokens and scored on "
        f"{DRY_REVERSE['samples']} rows per length"
    )


def _shrink(cfg, dry: bool):
    """The run config as planned, or for the dry run cut to ``DRY``'s shape."""
    from attnlab.train.config import RunConfig

    if not dry:
        return cfg
    values = cfg.to_dict()
    model, train = values["model"], values["train"]
    model.update(
        layers=min(model["layers"], DRY["layers"]),
        heads=min(model["heads"], DRY["heads"]),
        context=min(model["context"], DRY["context"]),
    )
    if model["inputs"] == "tokens":  # a vector model's width is its task's
        model.update(d_model=DRY["d_model"], ffn_width=None)
    train.update(batch=DRY["batch"], accum=1)
    return RunConfig.from_dict(values)


def _random_tokens(vocab: int, context: int):
    """Uniform random ids as a trainer stream: a step costs the same whatever the text."""
    import numpy as np

    from attnlab.train.data import TokenWindows

    class RandomTokens(TokenWindows):
        def describe(self) -> dict:
            return {"random tokens": self.vocab_size, "context": self.context}

    ids = np.random.default_rng(0).integers(0, vocab, size=2**20 + context + 1)
    return RandomTokens(ids, ids, vocab, context, seed=0)


def _decoder(cfg, stream, device, folder: Path):
    """(step, facts) of a run of the own decoder: ``step(i)`` is its ``Trainer``'s optimizer step i."""
    from attnlab import devices
    from attnlab.train.trainer import Trainer
    from attnlab.train.world import World

    cfg = devices.training(cfg, "auto", device)  # the precision the study's own runs take on this device
    trainer = Trainer(cfg, folder, stream=stream, progress=False, world=World(device=device))
    t = cfg.train
    inputs = stream.train_batch(0, t.batch)[0]
    facts = {
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "batch": t.batch,
        "micro-batches": t.accum,
        "tokens per step": inputs.shape[0] * inputs.shape[1],
        "precision": t.precision,
    }
    return trainer.train_step, facts


def _concentration(dry: bool, device, folder: Path):
    """(step, facts) of the concentration study's toy Llama: the study's own optimizer step on an induction batch."""
    import torch

    from attnlab import tasks
    from attnlab.studies.concentration import plan as concentration_plan
    from attnlab.studies.concentration.train import TRAIN_SEED_OFFSET, _batch, _tokenizer, build
    from attnlab.studies.concentration.train import step as train_step

    plan = concentration_plan.BUDGETS["full"]
    spec, length = plan.train, plan.length
    if dry:
        spec = dataclasses.replace(
            spec, layers=DRY["layers"], heads=DRY["heads"], hidden=DRY["d_model"], ffn=4 * DRY["d_model"]
        )
        spec, length = dataclasses.replace(spec, batch=DRY["batch"]), DRY["context"]
    tok = _tokenizer()
    prompts = tasks.build_suite(concentration_plan.SUITE, tok, spec.batch, seed=TRAIN_SEED_OFFSET, length=length)
    ids, labels = (t.to(device) for t in _batch(prompts))
    torch.manual_seed(0)
    model, opt = build(spec, tok, device)

    def step(_: int) -> None:
        train_step(model, opt, ids, labels)

    facts = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": spec.batch,
        "micro-batches": 1,
        "tokens per step": ids.numel(),
        "precision": "fp32",  # the study's loop runs without autocast
    }
    return step, facts


def _cases(dry: bool, device, folder: Path) -> list[tuple[str, str, object]]:
    """(study, run, build) for every study that trains a model, in the registry's order; ``build()`` gives
    (step, facts)."""
    from attnlab.studies import STUDIES, StudyConfig
    from attnlab.studies.lengthgen import study as lengthgen
    from attnlab.studies.lengthgen.config import run_config as cell_config
    from attnlab.studies.sinks import plan as sinks_plan
    from attnlab.studies.sinks.measures import DIM, LENGTH
    from attnlab.studies.specialization import plan as specialization_plan
    from attnlab.studies.temperature import plan as temperature_plan
    from attnlab.tasks import TaskStream

    def text(name: str, cfg):
        cfg = _shrink(cfg, dry)
        return _decoder(cfg, _random_tokens(cfg.model.vocab, cfg.model.context), device, folder / name)

    spec = specialization_plan.BUDGETS["full"]
    arch, arm, seed = specialization_plan.plan_runs(spec, 0)[0]  # the architecture the controls also train
    spec_run = specialization_plan.run_name(arch, arm, seed)
    temp, temp_run = temperature_plan.BUDGETS["full"], temperature_plan.run_name(0)
    sinks = sinks_plan.BUDGETS["full"]
    # the shapes differ in depth and heads on one tiny task: the deepest costs the most
    deepest = max(sinks_plan.runs(sinks), key=lambda run: sinks_plan.run_config(run, sinks, 0).model.layers)

    def sinks_case():
        cfg = _shrink(sinks_plan.run_config(deepest, sinks, 0), dry)
        stream = TaskStream("trigger_averaging", LENGTH, seed=cfg.train.seed, dim=DIM)
        return _decoder(cfg, stream, device, folder / deepest)

    def cell_case(task: str, cfg):
        if dry:  # the plan's shortest length: some tasks fit no shorter row
            cfg = dataclasses.replace(cfg, train_len=cfg.min_train_len or cfg.train_len, min_train_len=None)
        # no min_length: every timed step at the training length, the longest the plan draws
        stream = TaskStream(cfg.task, cfg.train_tokens, seed=0, **cfg.params)
        run = _shrink(cell_config(cfg, LENGTHGEN_MAP, stream.vocab_size, 0), dry)
        return _decoder(run, stream, device, folder / task)

    cases = [
        ("specialization", spec_run, lambda: text(spec_run, specialization_plan.run_config(spec, arch, arm, seed))),
        ("temperature", temp_run, lambda: text(temp_run, temperature_plan.run_config(temp, 0))),
        ("sinks", deepest, sinks_case),
        ("concentration", "toy Llama", lambda: _concentration(dry, device, folder)),
    ]
    for task, cfg in lengthgen.configs(StudyConfig(study="lengthgen", budget="full")).items():
        cases.append(("lengthgen", f"{task} {LENGTHGEN_MAP}", lambda task=task, cfg=cfg: cell_case(task, cfg)))
    order = list(STUDIES)
    return sorted(cases, key=lambda case: order.index(case[0]))


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(step, i: int, device) -> float:
    start = time.perf_counter()
    step(i)
    _sync(device)
    return time.perf_counter() - start


def _release(device) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _one_case(build, device, clock: Clock, repeats: int) -> dict:
    """Build a case, take a warm-up step, then up to ``repeats`` timed steps while the deadline leaves room for
    one more; an out-of-memory error is recorded, not raised."""
    import torch

    _release(device)
    started = time.perf_counter()
    try:
        step, facts = build()
        setup = time.perf_counter() - started
        warm = _timed(step, 0, device)
        seconds: list[float] = []
        while (
            len(seconds) < repeats
            and warm + sum(seconds) < CASE_S
            and clock.left(reserve=True) > 1.5 * (seconds[-1] if seconds else warm)
        ):
            seconds.append(_timed(step, len(seconds) + 1, device))
    except torch.cuda.OutOfMemoryError as exc:
        return {"status": f"out of memory: {str(exc).splitlines()[0][:200]}"}
    finally:
        step = None  # the model and its optimizer go with it, so that the release below frees them
        peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
        _release(device)
    median = statistics.median(seconds) if seconds else None
    return {
        **facts,
        "setup s": setup,
        "warm-up s": warm,
        "timed steps": len(seconds),
        "seconds": median,
        "tokens/s": facts["tokens per step"] / median if median else None,
        "peak MiB": peak,
        "status": "ok" if seconds else "deadline: the warm-up step only",
    }


def training_steps(device, dry: bool, clock: Clock) -> list[dict]:
    """One optimizer step of each study's full-budget model (``_cases``): parameters, tokens per step, the median
    seconds of the timed steps, tokens/s and the peak CUDA memory over the case."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for study, run, build in _cases(dry, device, Path(tmp)):
            if clock.left(reserve=True) <= 0:
                row = {"status": "deadline: not run"}
            else:
                row = _one_case(build, device, clock, 1 if dry else STEP_REPEATS)
            rows.append(row := {"study": study, "run": run, **row})
            print(
                f"| {study} | {run} | {row.get('parameters', '-')} | {row.get('tokens per step', '-')} | "
                f"{row.get('precision', '-')} | {_num(row.get('seconds'), 's')} | {_num(row.get('tokens/s'))} | "
                f"{_num(row.get('peak MiB'), 'MiB')} | {row['status']} |",
                flush=True,
            )
    return rows


def _num(value, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g} {unit}".strip()


def reverse(device, dry: bool, clock: Clock) -> dict:
    """Vasylenko et al. 2025's Reverse model (the lengthgen study's full plan: Table 5's 6 layers x 8 heads x 256,
    NAPE, trained at 32-64 source tokens) under each of ``ARMS`` for what the deadline leaves, each arm its share,
    then its final model's exact match and token accuracy at ``MULTIPLES`` of the training length on the same
    held-out rows (lengthgen's ``score``). No checkpoint selection: App. G.2 chooses among a full run's."""
    from attnlab import devices
    from attnlab.studies import StudyConfig
    from attnlab.studies.lengthgen import study as lengthgen
    from attnlab.studies.lengthgen.config import run_config
    from attnlab.studies.lengthgen.experiment import metric, mult_label

    planned = lengthgen.configs(StudyConfig(study="lengthgen", budget="full"))["reverse"]
    given: dict = {"maps": ARMS, "seeds": 1, "eval_mult": MULTIPLES}
    if dry:
        length = DRY_REVERSE["train_len"]
        given.update(train_len=length, min_train_len=length // 2, samples=DRY_REVERSE["samples"])
    cfg = dataclasses.replace(planned, **given)
    run = _shrink(run_config(cfg, ARMS[0], cfg.task_def.vocab_size), dry)
    model = run.model
    result = {
        "task": cfg.task,
        "positions": cfg.pe,
        "trained at": cfg.trained_at,
        "model": {"layers": model.layers, "heads": model.heads, "d_model": model.d_model, "ffn width": model.width},
        "batch": run.train.batch,
        "precision": devices.training(run, "auto", device).train.precision,
        "metric": metric(cfg.task_def)[0],
        "multiples": list(MULTIPLES),
        "lengths": {mult_label(m): cfg.length_at(m) for m in MULTIPLES},
        "samples": cfg.plan.samples,
        "arms": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(ARMS):
            share = clock.left() / (len(ARMS) - i)
            arm = _reverse_arm(cfg, name, share, device, dry, clock, Path(tmp) / name)
            result["arms"][name] = arm
            cells = " | ".join(_num(arm["accuracy"].get(mult_label(m))) for m in MULTIPLES)
            print(f"| {name} | {arm.get('steps', 0)} | {_num(arm.get('train s'), 's')} | {cells} | {arm['status']} |")
    return result


def _reverse_arm(cfg, name: str, share: float, device, dry: bool, clock: Clock, folder: Path) -> dict:
    """One arm: a probe trainer times ``PROBE_STEPS`` steps, the arm's run is sized to ``TRAIN_SHARE`` of what its
    share then leaves, trained by the ``Trainer``, and scored at every multiple while the deadline allows."""
    from attnlab import devices
    from attnlab.studies.lengthgen.config import TEST_SEED, run_config
    from attnlab.studies.lengthgen.experiment import mult_label, score
    from attnlab.tasks import TaskStream
    from attnlab.train.trainer import Trainer
    from attnlab.train.world import World

    out: dict = {"accuracy": {}, "token accuracy": {}}
    if share <= 0:
        return {**out, "status": "deadline: not run"}
    started = time.monotonic()
    world = World(device=device)
    stream = TaskStream(cfg.task, cfg.train_tokens, seed=cfg.seed, min_length=cfg.min_train_tokens, **cfg.params)
    probe = Trainer(
        devices.training(_shrink(run_config(cfg, name, stream.vocab_size), dry), "auto", device),
        folder / "probe",
        stream=stream,
        progress=False,
        world=world,
    )
    step_s = statistics.median(_timed(probe.train_step, i, device) for i in range(PROBE_STEPS))
    del probe
    _release(device)
    steps = min(cfg.plan.steps, int((share - (time.monotonic() - started)) * TRAIN_SHARE / step_s))
    if dry:
        steps = min(steps, DRY_REVERSE["steps"])
    out["probe step s"] = step_s
    if steps < 1:
        return {**out, "status": "deadline: no time to train"}
    run = _shrink(run_config(dataclasses.replace(cfg, steps=steps), name, stream.vocab_size), dry)
    run = devices.training(run, "auto", device)
    # only the final model is scored: one save at the end instead of the plan's checkpoints for selection
    run = dataclasses.replace(run, train=dataclasses.replace(run.train, checkpoint_every=0))
    trainer = Trainer(run, folder / "run", stream=stream, progress=False, world=world)
    summary = trainer.run()
    out.update(steps=summary["steps"], **{"train s": summary["seconds"], "final loss": summary["loss"]})
    scoring = time.monotonic()
    for mult in MULTIPLES:
        if clock.left() <= 0:
            break
        got = score(trainer.model, cfg.task_def, cfg.length_at(mult), cfg.plan.samples, seed=TEST_SEED)
        out["accuracy"][mult_label(mult)] = got["accuracy"]
        out["token accuracy"][mult_label(mult)] = got["token_accuracy"]
    out["score s"] = time.monotonic() - scoring
    done = len(out["accuracy"]) == len(MULTIPLES)
    return {**out, "status": "ok" if done else "deadline: some lengths not scored"}
