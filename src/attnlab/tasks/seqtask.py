"""The shared frame of attnlab's synthetic tasks: ``TaskBatch``, the ``Task`` base class and the
seeded generators behind every task, and ``TASKS``, the registry each task module adds its tasks to
with ``register`` (a user's own task goes in the same way).

Conventions every token task keeps:

- ``length`` is the number of input tokens per row; the task decides how many items fit (``sizes``).
- Position 0 holds ``<bos>``, as in the Vasylenko et al. 2025 authors' data formats (``{bos_token} {text} ...``).
- Generative tasks build one sequence ``S`` of ``length + 1`` tokens; ``ids = S[:-1]`` and ``targets[t] =
  S[t + 1]`` where ``S[t + 1]`` is an answer token (teacher forcing), else -100. The last answer token, or
  ``<eos>``, may sit at ``S[length]`` and so appear in the targets only. Where whole items leave one token
  spare, ``<eos>`` is the last input and its own target (``S[length]``) is unscored. Answers end with a
  scored ``<eos>`` (the authors' target pattern ``{text} {eos_token}``), except MQAR's scattered queries.
- Classification tasks score ``targets[t]``, the class of position ``t`` itself (not the next token).
- A batch is a pure function of (task, its parameters, n, length, seed): numpy generators seeded with
  ``default_rng([stream id of the task, purpose, seed, ...])`` (``task_rng``), never Python's salted ``hash()``.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attnlab.errors import ArgumentError, ArgumentTypeError, Error
from attnlab.registry import Registry

IGNORE = -100  # the index model.decoder.loss and exact_match skip

USER_STREAMS = 1 << 20  # a task registered without a stream id draws above every built-in one (module doc)


class TaskError(Error, ValueError):
    """A task, parameter, length or batch request the synthetic tasks cannot serve; the message says what is
    allowed."""


@dataclass(frozen=True)
class TaskBatch:
    """``ids`` (n, length) torch.long input tokens; ``targets`` (n, length) torch.long, -100 where unscored."""

    ids: torch.Tensor
    targets: torch.Tensor


@dataclass(frozen=True)
class VectorBatch:
    """``inputs`` and ``targets`` (n, length, dim) float32; ``mask`` (n, length) bool, True where scored."""

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor


# What a generator is for, always the second word of its seed: numpy's SeedSequence reads [a, b] and
# [a, b, 0] alike, so a purpose word that is never zero keeps a trailing 0 (step 0) from aliasing streams.
GENERATE, TRAIN, VALIDATION, VOCABULARY = 1, 2, 3, 4


def task_rng(name: str, purpose: int, *words: int) -> np.random.Generator:
    """The numpy generator of task ``name`` for ``purpose`` and the integer ``words`` (seed, step...):
    ``default_rng([stream id, purpose, *words])``, the same numbers on every machine."""
    return np.random.default_rng([stream_id(name), purpose, *words])


def check_request(n: int, seed: int) -> None:
    if n < 1 or seed < 0:
        raise TaskError(f"n = {n} rows, seed {seed}: allowed are n >= 1 and seed >= 0")


def need(ok: bool, message: str) -> None:
    """Raise TaskError(message) unless ``ok``: parameter checks read as one line each."""
    if not ok:
        raise TaskError(message)


def distinct(rng: np.random.Generator, n: int, population: int, k: int) -> np.ndarray:
    """(n, k) int64: each row ``k`` distinct draws from ``range(population)``, in random order."""
    return np.stack([rng.choice(population, size=k, replace=False) for _ in range(n)]).astype(np.int64)


def generative(seq: np.ndarray, answer: np.ndarray) -> TaskBatch:
    """The teacher-forced batch of ``seq`` (n, length + 1): ids ``seq[:, :-1]``, targets ``seq[:, 1:]`` where
    ``answer`` (same shape as ``seq``) marks an answer token, else -100."""
    targets = np.where(answer[:, 1:], seq[:, 1:], IGNORE)
    return TaskBatch(torch.from_numpy(np.ascontiguousarray(seq[:, :-1])).long(), torch.from_numpy(targets).long())


def classification(ids: np.ndarray, labels: np.ndarray) -> TaskBatch:
    """A batch whose ``targets[t]`` is the class of position ``t``; position 0 (``<bos>``) is unscored."""
    labels = labels.copy()
    labels[:, 0] = IGNORE
    return TaskBatch(torch.from_numpy(ids).long(), torch.from_numpy(labels).long())


@dataclass(frozen=True)
class Task:
    """A synthetic task: ``generate(n, length, seed) -> TaskBatch`` (``VectorBatch`` for vector tasks) and
    its specification.

    Subclasses are frozen dataclasses whose fields (besides ``name``) are the task's parameters; they set
    ``kind`` ("generative", "classification" or "vector"), ``source`` (seed and section), ``layout``
    (the row, in words), and implement ``vocab_size``, ``specials``, ``min_length``, ``sizes`` and ``draw``.
    """

    name: str
    kind: ClassVar[str]
    source: ClassVar[str]
    layout: ClassVar[str]
    paper_units: ClassVar[str | None] = None  # what the seed paper's length n counts, where ``row_length`` knows it

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    @property
    def specials(self) -> dict[str, int]:
        """Named non-data token ids (``bos``, ``eos``...), for show() and the spec."""
        raise NotImplementedError

    @property
    def min_length(self) -> int:
        raise NotImplementedError

    @property
    def max_length(self) -> int | None:
        """The longest ``length`` the parameters allow, or None when unbounded."""
        return None

    def sizes(self, length: int) -> dict[str, int]:
        """The task's size parameters at ``length`` (items, pairs, queries...)."""
        raise NotImplementedError

    def row_length(self, n: int) -> int:
        """The ``length`` (tokens of a row) whose task holds the seed paper's length ``n``, for tasks whose
        paper counts length in its own units (``paper_units`` says what ``n`` counts)."""
        raise TaskError(f"{self.name}: no paper length units are known for this task; give lengths in tokens")

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch | VectorBatch:
        """``n`` rows of ``length`` tokens (vectors) from ``rng``; ``length`` already checked."""
        raise NotImplementedError

    def params(self) -> dict:
        """The task's parameters (every field but ``name``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "name"}

    def check_length(self, length: int) -> None:
        top = self.max_length
        if length < self.min_length or (top is not None and length > top):
            allowed = f"{self.min_length} <= length" + (f" <= {top}" if top is not None else "")
            raise TaskError(
                f"{self.name}: length {length} does not fit the task with {self.params()}; allowed: {allowed}"
            )

    def generate(self, n: int, length: int, seed: int) -> TaskBatch | VectorBatch:
        """``n`` rows of ``length`` tokens (vectors), a pure function of (task, parameters, n, length, seed)."""
        check_request(n, seed)
        self.check_length(length)
        return self.draw(task_rng(self.name, GENERATE, seed), n, length)

    def token_name(self, token: int) -> str:
        """How show() writes ``token``: special ids by name, data ids as numbers."""
        names = {v: k for k, v in self.specials.items()}
        name = names.get(int(token))
        return str(int(token)) if name is None else name if len(name) == 1 else f"<{name}>"

    def describe(self) -> dict:
        """The task's specification, for a run's config.json and ``attnlab tasks``."""
        return {
            "task": self.name,
            "kind": self.kind,
            "source": self.source,
            "params": self.params(),
            "vocab_size": self.vocab_size,
            "specials": self.specials,
            "layout": self.layout,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "paper_units": self.paper_units,
            "targets": (
                "class of each position t >= 1 (position 0 <bos> unscored)"
                if self.kind == "classification"
                else "targets[t] = ids[t + 1] at answer tokens (teacher forcing), -100 elsewhere"
            ),
        }


TASKS: Registry[Task] = Registry("task")
_STREAM_IDS: dict[str, int] = {}


def free_stream(kind: str, name: str, stream: int | None, taken: dict[str, int]) -> int:
    """The stream id of ``kind`` ``name``: ``stream``, or ``USER_STREAMS + crc32(name)`` when None; a
    ValueError if it is not an int >= 1 or another entry of ``taken`` (name -> id) holds it already."""
    sid = USER_STREAMS + zlib.crc32(name.encode()) if stream is None else stream
    if isinstance(sid, bool) or not isinstance(sid, int) or sid < 1:
        raise ArgumentError(f"{kind} {name!r}: stream id must be an int >= 1, got {sid!r}")
    clash = [other for other, held in taken.items() if held == sid and other != name]
    if clash:
        raise ArgumentError(f"{kind} {name!r}: stream id {sid} is {kind} {clash[0]!r}'s; pick a free one")
    return sid


def register(task: Task, stream: int | None = None, *, replace: bool = False) -> Task:
    """Add ``task`` (an instance: its fields are the defaults ``get_task`` overrides) under ``task.name``.

    ``stream`` is the task's fixed id, the first word of every seed it draws (``task_rng``): one number per
    task keeps tasks that share a seed on unrelated streams, so a built-in task keeps its number for good
    and a new one takes the next free number, never a reused one. A user's task may leave it out and get
    ``USER_STREAMS + crc32(name)``, the same on every machine.
    """
    if not isinstance(task, Task):
        raise ArgumentTypeError(f"a task must be a Task instance, got {type(task).__name__}")
    taken = {name: sid for name, sid in _STREAM_IDS.items() if name in TASKS}
    sid = free_stream("task", task.name, stream, taken)
    TASKS.register(task.name, task, replace=replace)
    _STREAM_IDS[task.name] = sid
    return task


def stream_id(name: str) -> int:
    """The stream id task ``name`` was registered with."""
    TASKS.find(name)
    return _STREAM_IDS[name]
