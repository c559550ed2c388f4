"""The bibliography resolves every paper the package cites, and the package cites papers, not files or issues."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import attnlab
from attnlab.cli import main
from attnlab.papers import PAPERS, Paper, cite, get, register

SRC = Path(attnlab.__file__).parent


def _sources():
    return [p for p in sorted(SRC.rglob("*")) if p.suffix in (".py", ".c") and "__pycache__" not in p.parts]


def test_the_package_cites_no_seed_file_issue_or_note():
    # Whitespace may be a line break: a wrapped docstring splits "seed" from "003".
    pattern = re.compile(
        r"[Ss]eeds?(?:\s|\s*#\s*)*-?00[0-9]|issue\s+[0-9]|NOTES\.md|DESIGN\.md|"
        r"\b00[0-4]_[0-9a-f]{16}\.txt"
    )
    found = []
    for p in _sources():
        text = p.read_text(encoding="utf-8")
        found += [
            f"{p.relative_to(SRC)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
            for m in pattern.finditer(text)
        ]
    assert found == [], "\n".join(found[:20])


def test_every_author_year_citation_is_a_registered_key():
    """'Vasylenko et al. 2024' or 'Hayase & Karakida 2025' would point at no entry of the bibliography."""
    keys = [k for k in PAPERS if re.search(r"\d{4}$", k)]
    stems = {k.rsplit(" ", 1)[0]: k for k in keys}
    wrong = []
    for p in _sources():
        for stem, key in stems.items():
            for m in re.finditer(re.escape(stem) + r" (\d{4})", p.read_text(encoding="utf-8")):
                if f"{stem} {m.group(1)}" != key:
                    wrong.append(f"{p.relative_to(SRC)}: {m.group(0)}")
    assert wrong == []


def test_register_get_and_cite():
    assert cite("Vasylenko et al. 2025", "§4.1") == "Vasylenko et al. 2025 §4.1"
    assert get("Zhu et al. 2026").arxiv == "2605.10504"
    with pytest.raises(KeyError, match="unknown paper 'Smith 2020'; choose one of Polynomial Concentration"):
        cite("Smith 2020")
    with pytest.raises(ValueError, match="paper 'Zhu et al. 2026' is already registered"):
        register(Paper("Zhu et al. 2026", "x", None, None, None, "x"))
    with pytest.raises(TypeError, match="takes a Paper"):
        register("Smith 2020")
    mine = register(Paper("Smith 2030", "A paper of my own", "A. Smith", 2030, None, "a map"))
    try:
        assert cite("Smith 2030", "§2") == "Smith 2030 §2"
    finally:
        PAPERS.unregister(mine.key)


def test_papers_command_lists_every_paper(capsys):
    assert main(["papers"]) == 0
    out = capsys.readouterr().out
    for paper in PAPERS.values():
        assert paper.key in out and (paper.arxiv is None or f"arXiv:{paper.arxiv}" in out)
