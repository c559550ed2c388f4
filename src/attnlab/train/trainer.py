"""The training loop: one function, ``train(cfg, out)``, for one process or many under torchrun.

Every step is a pure function of (config, step, weights, optimizer state): batches come from the
stream by step, dropout's generator is reseeded from (seed, step, rank), and the release rule's state
travels in the checkpoint. So a run killed at any point and resumed from its last checkpoint retraces
the uninterrupted run bit for bit on CPU, and a run on N processes sees the same global batch as one.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from attnlab import io
from attnlab.model.config import ConfigError
from attnlab.model.decoder import Decoder, loss
from attnlab.readback import ReadBackError, read_record
from attnlab.train import checkpoint as ckpt
from attnlab.train import probes
from attnlab.train.config import RunConfig
from attnlab.train.data import DEFAULT_VAL_FRACTION, Batches, TextStream, TokenWindows, load_tokenizer, text_files
from attnlab.train.metrics import Metrics, TrainError, _truncate_metrics, write_tables
from attnlab.train.optim import cosine_lr, make_optimizer, set_lr, upper_qk_names
from attnlab.train.release import Release, cadence_warnings, reads_score
from attnlab.train.resume import RUN_FILES, _check_resumable, _is_run
from attnlab.train.shards import ShardStream
from attnlab.train.world import World, _max, _mean, init_world


def vector_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over positions of the squared l2 error: the training loss of Attention Sinks Essential's vector task
    (App. A)."""
    return (outputs.float() - targets.float()).pow(2).sum(-1).mean()


def vector_linf(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Attention Sinks Essential §3.2's l-infinity loss on a batch: the largest l2 error over rows and positions."""
    return float((outputs.detach().float() - targets.float()).norm(dim=-1).max())


def make_stream(cfg: RunConfig) -> TokenWindows:
    """The config's text: mapped from ``data.shards`` when set (nothing is tokenized, on any rank or resume),
    else tokenized from ``data.folder``."""
    data = cfg.data
    if data.shards is not None:
        # a val_fraction left at its default takes the shards' split; another one must be theirs
        fraction = None if data.val_fraction == DEFAULT_VAL_FRACTION else data.val_fraction
        return ShardStream(
            data.shards,
            context=cfg.model.context,
            seed=cfg.train.seed,
            val_fraction=fraction,
            max_tokens=data.max_tokens,
        )
    return TextStream(
        text_files(data.folder, data.patterns),
        load_tokenizer(data.tokenizer),
        context=cfg.model.context,
        seed=cfg.train.seed,
        val_fraction=data.val_fraction,
        max_tokens=data.max_tokens,
    )


@dataclass(frozen=True)
class _Summary:
    """summary.json (``Trainer.run``) as a resumed run with no step left reads it back (``readback.read_record``):
    steps present, every other key of its type where present (an older attnlab wrote fewer)."""

    steps: int
    loss: float | None = None
    val_loss: float | None = None
    val_ppl: float | None = None
    released_at: int | None = None
    release_reason: str | None = None
    world_size: int = 1
    seconds: float = 0.0
    tokens_per_s: float = 0.0
    stop_linf: float | None = None
    stopped: bool = False
    stop_batch_linf: float | None = None
    warnings: list[str] = field(default_factory=list)


def _step_seed(seed: int, step: int, rank: int) -> int:
    return (seed * 1_000_003 + step * 7919 + rank) % 2**63


def _autocast(precision: str, device: torch.device):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


EvalHook = Callable[["Trainer"], Mapping[str, float]]


class Trainer:
    """One run: the model (DDP-wrapped when the world is larger than one), its optimizer, the release
    rule and the stream. ``run()`` trains from the current step to ``train.steps`` (``train.stop_at`` when set:
    the same run's schedule, ended early).

    ``stream``: any ``data.Batches`` (a synthetic task stream) instead of the config's text; token
    streams train with cross-entropy, ``model.inputs: vectors`` streams with the squared l2 error.
    ``eval_hooks``: callables given the trainer at each evaluation, whose numbers join the eval record
    (a task's accuracy, a study's own probe).
    ``stop_linf`` (vector streams only): App. A's stopping rule of Attention Sinks Essential, "until the
    l-inf loss is less than 1e-2 for the entire batch". Each step first scores its training batch; when that
    batch's l-inf loss (``vector_linf``, the max over every process's rows) is below ``stop_linf``, the run
    stops there without updating on it, so the saved model is the one that met the rule and ``step`` counts
    the updates made. The stop is saved in the checkpoint: a resumed run that had stopped trains no further.
    """

    def __init__(
        self,
        cfg: RunConfig,
        out: str | Path,
        *,
        resume: bool = False,
        overwrite: bool = False,
        progress: bool = True,
        world: World | None = None,
        device: str = "auto",
        stream: Batches | None = None,
        eval_hooks: Sequence[EvalHook] = (),
        stop_linf: float | None = None,
    ) -> None:
        self.world = world or init_world(device)
        self.out = Path(out)
        self.progress = progress and self.world.main
        self.cfg = cfg
        self.stream = make_stream(cfg) if stream is None else stream
        self.eval_hooks = tuple(eval_hooks)
        self.tokens = cfg.model.inputs == "tokens"
        self.loss = loss if self.tokens else vector_loss
        if self.tokens and self.stream.vocab_size > cfg.model.vocab:
            raise ConfigError(
                f"model.vocab ({cfg.model.vocab}) is smaller than the stream's vocabulary ({self.stream.vocab_size})"
            )
        t = cfg.train
        if (t.batch // self.world.size) % t.accum or t.batch % self.world.size:
            raise ConfigError(
                f"train.batch ({t.batch}) must split evenly over {self.world.size} processes and then "
                f"over train.accum ({t.accum}) micro-batches"
            )
        if stop_linf is not None and (
            self.tokens
            or isinstance(stop_linf, bool)
            or not isinstance(stop_linf, (int, float))
            or not 0 < stop_linf < math.inf
        ):
            raise ConfigError(
                f"stop_linf must be None or a finite number > 0 with model.inputs vectors (the l-inf "
                f"loss is a vector task's), got {stop_linf!r} with inputs {cfg.model.inputs!r}"
            )
        self.stop_linf = stop_linf
        # the batch that met the stop rule: {"step", "linf", "loss"}; None while the run has not stopped
        self.stopped: dict[str, Any] | None = None
        if cfg.intervention.active and not self.tokens:
            raise ConfigError(
                "the intervention table (Zhu et al. 2026) needs model.inputs tokens: its release rule "
                "and entropy floor read token repeats and attention rows of a language model"
            )
        if cfg.intervention.entropy_floor > 0 and cfg.model.layers < 2:
            raise ConfigError("intervention.entropy_floor needs model.layers >= 2 (it acts on the upper half)")
        torch.manual_seed(t.seed)
        self.model = Decoder(cfg.model).to(self.world.device)
        upper = set(upper_qk_names(self.model))
        self.initial = {name: p.detach().clone() for name, p in self.model.named_parameters() if name in upper}
        self.optimizer = make_optimizer(self.model, t.lr, t.weight_decay, t.betas)
        self.release = Release(cfg.intervention, t.steps)
        self.warnings = self._release_warnings()
        self.step = 0
        self._start(resume, overwrite)
        self.net: nn.Module = self.model
        if self.world.size > 1:
            self.net = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.world.device.index] if self.world.device.type == "cuda" else None
            )

    def _release_warnings(self) -> list[str]:
        """``release.cadence_warnings`` for this run, also issued as RuntimeWarnings (main process only)."""
        t, rule = self.cfg.train, self.cfg.intervention
        if not (self.tokens and rule.active and rule.release == "rule"):
            return []
        ids = self.stream.val_batches(max(1, t.batch // t.accum), 1)[0][0]
        found = cadence_warnings(rule, t.steps, t.eval_every, probes.lower_copy_chance(ids))
        if self.world.main:
            for message in found:
                warnings.warn(message, RuntimeWarning, stacklevel=3)
        return found

    def _prepare(self, resume: bool, overwrite: bool) -> None:
        """Refuse a run that would mix with or replace files it did not write; with ``overwrite``, clear an
        earlier run's files first (only those its folder's marker lists: ``io.clear``). A folder without the
        marker that holds files is a user's, or the run of an older attnlab, which only --resume continues."""
        if resume and overwrite:
            raise TrainError("--resume continues the run in --out and --overwrite discards it: pass one of them")
        visible = sorted(e.name for e in self.out.iterdir() if not e.name.startswith(".")) if self.out.is_dir() else []
        if resume and visible and not _is_run(self.out):
            raise TrainError(
                f"--resume: {self.out} holds no attnlab run to continue ({', '.join(visible[:4])}"
                f"{', ...' if len(visible) > 4 else ''}); choose the run's folder, or a new --out"
            )
        if visible and io.listed(self.out) is None:
            if not _is_run(self.out):
                raise io.unclaimed_error(self.out, "train")
            if not resume:
                raise TrainError(
                    f"{self.out} holds a run of an older attnlab (no {io.MARKER}), whose files --overwrite cannot "
                    "tell from yours: pass --resume to continue it, delete it yourself, or choose another --out"
                )
            io.claim(self.out, adopt=RUN_FILES)  # its config.json says it is a run: its files are this one's
        held = io.listed(self.out) or []
        taken = [name for name in RUN_FILES if name in visible and name not in held]
        if taken:
            raise TrainError(
                f"{self.out} holds {', '.join(taken)}, which no attnlab run wrote there; move them away, or "
                "choose another --out"
            )
        ckpt.remove_stale_saves(self.out)
        if resume:
            return
        present = [name for name in RUN_FILES if name in visible]
        foreign = [name for name in visible if name not in RUN_FILES]
        if foreign and not present and not overwrite:
            raise TrainError(
                f"{self.out} holds files train did not write ({', '.join(foreign[:4])}"
                f"{', ...' if len(foreign) > 4 else ''}); pass --overwrite to write beside them, or choose "
                "another --out"
            )
        if not present:
            return
        if not overwrite:
            found = ckpt.latest_checkpoint(self.out)
            shown = f"a run (checkpoint {found.name})" if found is not None else ", ".join(present)
            raise TrainError(
                f"{self.out} already holds {shown}; pass --resume to continue it, --overwrite to start "
                "clean, or choose another --out"
            )
        io.clear(self.out, RUN_FILES)

    def _start(self, resume: bool, overwrite: bool) -> None:
        if self.world.main:
            self._prepare(resume, overwrite)
        if self.world.size > 1:
            dist.barrier()
        found = ckpt.latest_checkpoint(self.out)
        if found is not None:
            state = ckpt.load_checkpoint(found)
            _check_resumable(state.meta["config"], self.cfg.to_dict())
            if "data" in state.meta:  # the same config can name other data: a corpus or shards made again
                ckpt.check_compatible(state.meta["data"]["stream"], self.stream.describe(), what="training data")
            if state.meta.get("stop_linf") != self.stop_linf:
                raise TrainError(
                    f"{found} was trained with stop_linf {state.meta.get('stop_linf')!r} and this run "
                    f"asks {self.stop_linf!r}: resume with the same rule or start anew (--overwrite)"
                )
            self.stopped = state.meta.get("stopped")
            self.model.load_state_dict(state.model_state)
            self.optimizer.load_state_dict(state.optimizer_state)
            self.release.load_state_dict(state.meta["release"])
            ckpt.restore_rng(state.rng)
            self.step = state.step
        if self.world.main:
            self.out.mkdir(parents=True, exist_ok=True)
            io.claim(self.out)  # before the first file: a run killed at any point leaves its folder marked
            if resume:
                _truncate_metrics(self.out, self.step)
            io.record(self.out, "config.json")
            io.write_json(
                self.out / "config.json",
                {
                    **self.cfg.to_dict(),
                    "data_stream": self.stream.describe(),
                    "world_size": self.world.size,
                    "stop_linf": self.stop_linf,
                },
            )
        if self.world.size > 1:
            dist.barrier()

    def train_step(self, step: int) -> dict[str, float]:
        cfg, t = self.cfg, self.cfg.train
        self.release.advance(step)
        lr = cosine_lr(step, steps=t.steps, lr=t.lr, min_lr=t.min_lr, warmup=t.warmup)
        multiplier = self.release.upper_qk_multiplier(step)
        set_lr(self.optimizer, lr, multiplier)
        floor = self.release.entropy_floor(step)
        inputs, targets = self.stream.train_batch(step, t.batch, self.world.rank, self.world.size)
        inputs, targets = inputs.to(self.world.device), targets.to(self.world.device)
        torch.manual_seed(_step_seed(t.seed, step, self.world.rank))
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        micro = inputs.shape[0] // t.accum
        ce_sum = h_sum = 0.0
        linf = 0.0
        for i in range(t.accum):
            rows = slice(i * micro, (i + 1) * micro)
            last = i == t.accum - 1
            sync = contextlib.nullcontext() if last or self.net is self.model else self.net.no_sync()
            tracker = probes.upper_entropy_tracker(self.model) if floor > 0 else contextlib.nullcontext()
            with sync:
                with _autocast(t.precision, self.world.device), tracker as seen:
                    outputs = self.net(inputs[rows])
                    ce = self.loss(outputs, targets[rows])
                if not self.tokens:
                    linf = max(linf, vector_linf(outputs, targets[rows]))
                objective = ce
                if floor > 0:
                    h_upper = seen.value()
                    objective = ce + floor * torch.relu(cfg.intervention.h0 - h_upper)
                    h_sum += float(h_upper.detach())
                (objective / t.accum).backward()
            ce_sum += float(ce.detach())
        if not self.tokens:
            linf = _max(linf, self.world)
            if self.stop_linf is not None and linf < self.stop_linf:
                self.optimizer.zero_grad(set_to_none=True)
                return {"loss": _mean(ce_sum / t.accum, self.world), "linf": linf, "stopped": True}
        params = [p for p in self.model.parameters() if p.grad is not None]
        if t.clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, t.clip))
        else:
            norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
        self.optimizer.step()
        record = {
            "loss": _mean(ce_sum / t.accum, self.world),
            "lr": lr,
            "upper_qk_lr_multiplier": multiplier,
            "grad_norm": norm,
        }
        if floor > 0:
            record.update(entropy_floor=floor, upper_entropy=_mean(h_sum / t.accum, self.world))
        if not self.tokens:
            record["linf"] = linf
        return record

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation loss and perplexity on the fixed validation batches; the Zhu et al. 2026 probes on the
        first of them. Every rank computes the same numbers, so the release rule agrees without talking."""
        t = self.cfg.train
        batches = self.stream.val_batches(max(1, t.batch // t.accum), t.eval_batches)
        self.model.eval()
        total = 0.0
        for inputs, targets in batches:
            with _autocast(t.precision, self.world.device):
                total += float(self.loss(self.model(inputs.to(self.world.device)), targets.to(self.world.device)))
        record = {"val_loss": total / len(batches)}
        first = [x.to(self.world.device) for x in batches[0]]
        if self.tokens:
            record["val_ppl"] = math.exp(record["val_loss"])
            if t.probes:
                record.update(probes.probe(self.model, *first, initial=self.initial))
        for hook in self.eval_hooks:
            record.update(hook(self))
        if self.tokens and "lower_copy" not in record and (t.probes or self.cfg.intervention.active):
            record.update(probes.copy_scores(probes.lower_copy_score(self.model, first[0]), first[0]))
        if self.tokens and self.cfg.intervention.score_every <= 0 and self._rule_reads():
            self.release.observe(self.step, record["lower_copy"], record["lower_copy_chance"])
        record["released_at"] = self.release.released_at
        self.model.train()
        return record

    def _rule_reads(self) -> bool:
        return self.cfg.intervention.active and self.cfg.intervention.release == "rule"

    def _reads_copy(self) -> bool:
        """Whether this step takes a lower-copy reading of its own (``intervention.score_every``): in every
        token run that logs probes or is released by the rule, so a control is dated on the intervention's grid."""
        i = self.cfg.intervention
        return (
            self.tokens
            and (self.cfg.train.probes or self._rule_reads())
            and reads_score(i, self.cfg.train.steps, self.step)
        )

    @torch.no_grad()
    def read_copy(self) -> dict[str, float]:
        """The lower-copy score on the first evaluation batch's inputs, the rule's maturity reading between
        evaluations (one forward pass of those rows; Zhu et al. 2026 §2); the rule observes it."""
        t = self.cfg.train
        ids = self.stream.val_batches(max(1, t.batch // t.accum), t.eval_batches)[0][0].to(self.world.device)
        record = probes.copy_scores(probes.lower_copy_score(self.model, ids), ids)
        if self._rule_reads():
            self.release.observe(self.step, record["lower_copy"], record["lower_copy_chance"])
        record["released_at"] = self.release.released_at
        return record

    def save(self) -> None:
        if self.world.main:
            meta = {
                "config": self.cfg.to_dict(),
                "release": self.release.state_dict(),
                "data": {"next_step": self.step, "stream": self.stream.describe()},
                "world_size": self.world.size,
                "stop_linf": self.stop_linf,
                "stopped": self.stopped,
            }
            ckpt.save_checkpoint(
                self.out,
                self.step,
                model_state=self.model.state_dict(),
                optimizer_state=self.optimizer.state_dict(),
                meta=meta,
                rng=ckpt.capture_rng(),
                keep=self.cfg.train.keep,
            )
        if self.world.size > 1:
            dist.barrier()

    def run(self) -> dict[str, Any]:
        t = self.cfg.train
        end = t.steps if t.stop_at is None else t.stop_at  # the schedule stays the steps-long run's
        done = self.out / "summary.json"
        if (self.step >= end or self.stopped is not None) and done.is_file():
            # A resumed run with no step left keeps the summary of the process that trained it. One that does not
            # read back is written anew, as after a kill between the last save and the summary: it is the run's own
            # file (its marker lists it), and what it held can no longer be read either way.
            with contextlib.suppress(ReadBackError):
                return read_record(done, _Summary)
        metrics = Metrics(self.out, t.tensorboard) if self.world.main else None
        # disable=None: drawn only when stderr is a terminal, so a captured log gets no redrawn bars
        bar = tqdm(
            total=end, initial=self.step, disable=None if self.progress else True, unit="step", dynamic_ncols=True
        )
        tokens_per_step = t.batch * self.cfg.model.context
        started, start_step = time.perf_counter(), self.step
        record: dict[str, Any] = {}
        evaluated: dict[str, Any] = {}
        try:
            while self.step < end and self.stopped is None:
                tick = time.perf_counter()
                record = self.train_step(self.step)
                if record.get("stopped"):
                    self.stopped = {"step": self.step, "linf": record["linf"], "loss": record["loss"]}
                    if evaluated.get("step") != self.step:
                        evaluated = {"kind": "eval", "step": self.step, **self.evaluate()}
                        if metrics:
                            metrics.log(evaluated)
                    self.save()
                    break
                self.step += 1
                record.update(kind="train", step=self.step, tokens_per_s=tokens_per_step / (time.perf_counter() - tick))
                if metrics:
                    metrics.log(record)
                if self._reads_copy():
                    reading = {"kind": "copy", "step": self.step, **self.read_copy()}
                    if metrics:
                        metrics.log(reading)
                if self.step % t.eval_every == 0 or self.step == end:
                    evaluated = {"kind": "eval", "step": self.step, **self.evaluate()}
                    if metrics:
                        metrics.log(evaluated)
                if (t.checkpoint_every and self.step % t.checkpoint_every == 0) or self.step == end:
                    self.save()
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:.0f}")
        finally:
            bar.close()
            if metrics:
                metrics.close()
        seconds = time.perf_counter() - started
        stopped = self.stopped or {}
        summary = {
            "steps": self.step,
            "loss": stopped.get("loss", record.get("loss")),
            "val_loss": evaluated.get("val_loss"),
            "val_ppl": evaluated.get("val_ppl"),
            "released_at": self.release.released_at,
            "release_reason": self.release.reason,
            "world_size": self.world.size,
            "seconds": seconds,
            "tokens_per_s": tokens_per_step * (self.step - start_step) / max(seconds, 1e-9),
            "stop_linf": self.stop_linf,
            "stopped": self.stopped is not None,
            "stop_batch_linf": stopped.get("linf"),
            "warnings": self.warnings,
        }
        if self.world.main:
            write_tables(self.out)
            io.record(self.out, "summary.json")
            io.write_json(self.out / "summary.json", summary)
        return summary


def train(
    cfg: RunConfig, out: str | Path, *, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Train ``cfg`` into ``out`` (checkpoints, metrics.jsonl, train.csv, eval.csv, config.json,
    summary.json); with ``resume``, continue from ``out``'s last checkpoint; with ``overwrite``, discard an
    earlier run's files there first."""
    return Trainer(cfg, out, resume=resume, overwrite=overwrite, progress=progress).run()
