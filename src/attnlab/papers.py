"""The papers attnlab is built from: the bibliography that its docstrings, tables and reports cite.

attnlab cites a paper by its key (``Vasylenko et al. 2025 §4.1``); ``attnlab papers`` lists them with
titles, authors and arXiv ids, so a reader of any docstring or report can find the text behind it.
``register`` adds a paper of your own (a study or row map you add can then cite it).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.errors import ArgumentTypeError, UnknownNameError
from attnlab.registry import Registry


@dataclass(frozen=True)
class Paper:
    """key: how attnlab cites the paper; authors and year are None where the paper is an anonymous
    submission, arxiv where it has no public id; takes: what attnlab takes from it."""

    key: str
    title: str
    authors: str | None
    year: int | None
    arxiv: str | None
    takes: str


PAPERS: Registry[Paper] = Registry("paper")


def register(paper: Paper) -> Paper:
    """Add ``paper`` under its key; a key is taken once."""
    if not isinstance(paper, Paper):
        raise ArgumentTypeError(f"register takes a Paper, got {type(paper).__name__}")
    return PAPERS.register(paper.key, paper)


def get(key: str) -> Paper:
    try:
        return PAPERS.find(key)
    except ValueError as exc:
        raise UnknownNameError(str(exc)) from None


def cite(key: str, where: str = "") -> str:
    """``key`` and the place in the paper (``cite("Vasylenko et al. 2025", "§4.1")``), checked to exist."""
    get(key)
    return f"{key} {where}".strip()


register(
    Paper(
        "Polynomial Concentration",
        "When Does Polynomial Attention Concentrate? A Relative-Margin Diagnostic for Zero-Shot Softmax Substitution",
        None,
        None,
        None,
        "S_p and p*, the row status labels, the 14 substitution recipes, b_auto, the diagnostic prompt "
        "suites, group head ablation, head types, the matched diagnostic",
    )
)
register(
    Paper(
        "Vasylenko et al. 2025",
        "Long-Context Generalization with Sparse Attention",
        "Pavlo Vasylenko, Hugo Pitorro, André F. T. Martins, Marcos Treviso",
        2025,
        "2506.16640",
        "alpha-entmax and ASEntmax, SSMax, NAPE, the synthetic length-generalization tasks",
    )
)
register(
    Paper(
        "Zhu et al. 2026",
        "Learning Less Is More: Premature Upper-Layer Attention Specialization Hurts Language Model Pretraining",
        "Jinchang Zhu, Jindong Li, Yuwen Hao, Chengyu Zou, Rong Fu, Menglin Yang",
        2026,
        "2605.10504",
        "the upper-Q/K learning-rate intervention, its release rule and the mechanism probes",
    )
)
register(
    Paper(
        "Hayase & Karakida 2026",
        "A Unified Framework for Critical Scaling of Inverse Temperature in Self-Attention",
        "Tomohiro Hayase, Ryo Karakida",
        2026,
        "2605.12697",
        "gap counting, Lambda_n and the contact point, the xi estimators, m(n; xi), the learnable beta_n",
    )
)
register(
    Paper(
        "Attention Sinks Essential",
        "Attention Sinks Are Functionally Essential in Softmax Transformers: Theoretical Evidence",
        None,
        None,
        None,
        "the trigger-conditional averaging task, ReLU/n attention, the sink measurement",
    )
)
