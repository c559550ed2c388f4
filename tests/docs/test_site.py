"""The docs site builds with --strict (no broken link, missing snippet or missing reference) and the README stays a short front door."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from browser import NEEDS_CHROMIUM, browser, served

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# .ci/run runs the test command verbatim; the main command and the demo are what the README's timings were measured on.
MAIN = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[gguf]' -c cpu-constraints.txt && .venv/bin/attnlab fetch smollm2 && "
    ".venv/bin/attnlab card smollm2 --out runs/card"
)
DEMO = ".venv/bin/attnlab demo --out runs/demo"
TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' -c cpu-constraints.txt && .venv/bin/attnlab fetch smollm2 && "
    ".venv/bin/python -m pytest -q -n auto"
)


def _mkdocs() -> list[str]:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is not installed")
    return [sys.executable, "-m", "mkdocs"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [*_mkdocs(), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    return re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))


def test_strict_build_passes_and_fills_the_generated_pages(site):
    cli = _text(site / "reference" / "cli" / "index.html")
    for name in ("audit", "substitute", "study", "demo", "train", "xi-sweep"):
        assert f"attnlab {name}" in cli, name
    assert "--b-auto" in cli and "--budget" in cli  # flags come from the option dataclasses
    api = _text(site / "reference" / "rowmaps" / "index.html")
    assert "get" in api and "RowMapLayer" in api
    guide = (site / "guides" / "concentration" / "index.html").read_text(encoding="utf-8")
    assert "<!-- attnlab:" not in guide and "--8&lt;--" not in guide and "--8<--" not in guide
    assert "not reproduced" in guide and "<table" in guide
    assert not (site / "hooks.py").exists() and not (site / "records").exists()


def test_a_missing_snippet_fails_the_strict_build(tmp_path):
    """check_paths is on: a page including a table that is not recorded must not build as an empty table."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("reference"))
    (docs / "reference").mkdir()
    for page in ("cli", "attnlab", "rowmaps", "diagnostics", "site", "hooks"):
        (docs / "reference" / f"{page}.md").write_text(f"# {page}\n")
    (docs / "results.md").write_text('# Results\n\n--8<-- "docs/records/demo/nowhere/table.md"\n')
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    run = subprocess.run(
        [*_mkdocs(), "build", "--strict", "-d", str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1", "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode != 0
    assert "nowhere/table.md" in run.stdout + run.stderr


def test_readme_is_short_and_opens_its_set_up_section_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    setup = text.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    assert setup.lstrip("\n").startswith("```bash\n" + MAIN + "\n```")
    blocks = re.findall(r"```bash\n(.*?)\n```", setup, re.DOTALL)
    assert blocks[:3] == [MAIN, TESTS, DEMO]
    assert TESTS in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    # the sentences that say how long each takes stay beside the commands
    assert re.search(r"\d+\.\d minutes for the quick card", setup)
    assert re.search(r"\d+\.\d minutes, of which", setup) and re.search(r"\d+\.\d minutes on a fresh clone", setup)


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), target


def test_license_and_changelog():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "Copyright (c) 2026 attnlab contributors" in license_text
    assert "## 0.1.0" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


@pytest.mark.slow
@NEEDS_CHROMIUM
def test_pages_render_without_console_errors_and_search_finds_a_map(site):
    pytest.importorskip("selenium", reason="pip install selenium")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with served(site) as address, browser() as driver:
        for page in ("", "guides/sinks/", "guides/concentration/", "reference/cli/", "reference/rowmaps/"):
            driver.get(f"{address}/{page}")
            assert driver.find_element(By.CSS_SELECTOR, "article h1").text, page
            severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert severe == [], (page, severe)
        driver.get(f"{address}/")
        box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
        box.click()
        box.send_keys("entmax")
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
        assert "entmax" in driver.find_element(By.CSS_SELECTOR, ".md-search-result").text.lower()
