"""Every file a run folder holds (config.json, section.json, row.json, the CSV and Parquet tables), given each hostile
edit of its kind (bad bytes, a JSON list, a key's value of the wrong type, a missing key, NaN, a depth bomb, an empty
file), ends `attnlab report` (and `release-replay` on a training run) in exit 0 with a page of the folder or one
stderr line, in time, with the input folder read-only and byte-identical afterwards (the table is generated from the
folders the smallest real runs write: a new file kind of theirs is covered)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from attnlab import io as attnlab_io
from attnlab.cli import main
from checkpoints import save_checkpoint
from hostile_json import get_key, set_key
from hostile_run import run_within

BOMB = b"[" * 100_000 + b"]" * 100_000  # deeper than any JSON parser recurses
# The files of each folder the table edits, one of each kind the report or the replay reads; with UNREAD, every JSON,
# CSV and Parquet file the smallest real runs write at the top of their folders (held to that by
# test_the_table_covers_every_file_the_smallest_runs_write).
FILES = {
    "audit": ("audit.csv", "config.json", "rows_b0.parquet"),
    "study": ("config.json", "row.json", "rowmaps.csv", "section.json"),
    "run": ("config.json", "eval.csv"),
}
UNREAD = {
    "audit": (),
    "study": (),
    "run": ("summary.json", "train.csv"),  # release-replay reads the config and the evaluations only
}
# The keys each edit of a JSON file's values aims at (dotted: a key of a table): what the report or the replay reads.
KEYS = {
    ("audit", "config.json"): ("p", "biases"),
    ("study", "config.json"): ("study", "budget"),
    ("study", "section.json"): ("title", "findings"),
    ("study", "row.json"): ("row",),
    ("run", "config.json"): ("train.steps", "model"),
}
# The columns each edit of a CSV table aims at; a table not named here gets its first numeric column.
COLUMNS = {("run", "eval.csv"): ("step", "lower_copy")}
FIRST = "the first numeric column"
TITLE = {"audit": "Audit of", "study": "Row maps on one score row"}
PNG = bytes.fromhex(  # a 1 x 1 PNG: the page embeds what a figure file holds, and drawing real ones costs seconds
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
BYTES = {"bytes ff fe": b"\xff\xfe", "a JSON list": b"[]", "empty": b""}


def _json_edits(key: str) -> dict[str, object]:
    def wrong(data: dict) -> dict:
        value = get_key(data, key)
        return set_key(data, key, "abc" if isinstance(value, list) else [value])  # "study": ["sinks"], "p": "abc"

    return {
        f"{key} of the wrong type": wrong,
        f"{key} missing": lambda data: set_key(data, key, None, drop=True),
        f"{key} NaN": lambda data: set_key(data, key, float("nan")),
    }


def _csv_edits(column: str) -> dict[str, object]:
    def cell(text: str):
        def edit(frame: pd.DataFrame, name: str) -> pd.DataFrame:
            frame = frame.astype({name: object})
            frame.loc[frame.index[0], name] = text
            return frame

        return edit

    return {
        f"{column} of the wrong type": cell("abc"),
        f"{column} missing": lambda frame, name: frame.drop(columns=[name]),
        f"{column} NaN": cell(""),
    }


def _edits(folder: str, name: str) -> dict[str, object]:
    """The hostile edits of one file, by label: bytes for every file, and for a JSON file a depth bomb and its aimed
    keys' edits, for a CSV table its aimed columns' edits."""
    edits: dict[str, object] = dict(BYTES)
    if name.endswith(".json"):
        edits["depth bomb"] = BOMB
        for key in KEYS.get((folder, name), ()):
            edits.update(_json_edits(key))
    elif name.endswith(".csv"):
        for column in COLUMNS.get((folder, name), (FIRST,)):
            edits.update(_csv_edits(column))
    return edits


CASES = [(folder, name, label) for folder, names in FILES.items() for name in names for label in _edits(folder, name)]


def _fast_figures(monkeypatch) -> None:
    """Every figure a command or study draws from the report's plot functions is a 1 x 1 PNG and an empty SVG instead
    (written through ``io.atomic_write``, so the link and claim checks still run): the folders' readers are under
    test here, the drawing in tests/report/test_plot_*, and drawing takes seconds a case."""
    import importlib
    import pkgutil

    import attnlab.analyses
    import attnlab.studies

    def stub(*args, **kwargs):
        path = Path(next(a for a in (*args, *kwargs.values()) if isinstance(a, Path)))
        png = attnlab_io.atomic_write(path.with_suffix(".png"), lambda tmp: Path(tmp).write_bytes(PNG))
        svg = attnlab_io.atomic_write(path.with_suffix(".svg"), lambda tmp: Path(tmp).write_text("<svg/>"))
        return png, svg

    for package in (attnlab.analyses, attnlab.studies):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if name.startswith("plot_") and getattr(value, "__module__", "").startswith("attnlab.report."):
                    monkeypatch.setattr(module, name, stub)


@pytest.fixture(scope="module")
def quick():
    with pytest.MonkeyPatch.context() as patch:
        _fast_figures(patch)
        yield


@pytest.fixture(scope="module")
def world(quick, tmp_path_factory):
    """The smallest real folders, made once: an audit of a tiny checkpoint over two prompts, the rowmaps study and a
    two-step training run."""
    root = tmp_path_factory.mktemp("hostile_folders")
    save_checkpoint(root / "model")
    (root / "tiny.yaml").write_text(
        "model: {context: 32, layers: 1, heads: 2, d_model: 16}\n"
        "train: {steps: 2, batch: 4, warmup: 1, tensorboard: false}\n"
    )
    audit = ["audit", "--model", str(root / "model"), "--prompts", "2", "--pad", "2", "--p", "2", "4", "--b", "0"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*audit, "--queries", "every:4", "--out", str(root / "audit"), "--no-progress"]) == 0
        assert main(["study", "rowmaps", "--out", str(root / "study"), "--no-progress"]) == 0
        assert main(["train", str(root / "tiny.yaml"), "--out", str(root / "run"), "--no-progress"]) == 0
    return root


def _read_only(folder: Path, on: bool) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222 if on else mode | 0o200)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _edited(path: Path, folder: str, label: str) -> None:
    edit = _edits(folder, path.name)[label]
    if isinstance(edit, bytes):
        path.write_bytes(edit)
    elif path.suffix == ".json":
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    else:
        frame = pd.read_csv(path)
        column = label.split(" of the wrong type")[0].split(" missing")[0].split(" NaN")[0]
        edit(frame, frame.select_dtypes("number").columns[0] if column == FIRST else column).to_csv(path, index=False)


def test_the_table_covers_every_file_the_smallest_runs_write(world):
    for folder, names in FILES.items():
        # hidden files (io's lock and claim marker) are io's bookkeeping, which the report does not read
        files = [p.name for p in (world / folder).iterdir() if not p.name.startswith(".")]
        written = sorted(name for name in files if Path(name).suffix in (".json", ".csv", ".parquet"))
        assert written == sorted((*names, *UNREAD[folder])), f"{folder}: a new file of the smallest runs joins FILES"
    assert len(CASES) > 60


@pytest.mark.parametrize(("folder", "name", "label"), CASES, ids=[f"{f}/{n} {e}" for f, n, e in CASES])
def test_a_hostile_file_is_one_line_or_a_page_and_the_folder_is_left_as_it_was(
    world, folder, name, label, tmp_path, capsys
):
    given = tmp_path / folder
    shutil.copytree(world / folder, given)
    _edited(given / name, folder, label)
    _read_only(given, True)
    before = _snapshot(given)
    try:
        if folder == "run":
            code = run_within(["release-replay", str(given)])
        else:
            code = run_within(["report", str(given), "--out", str(tmp_path / "out")])
        after = _snapshot(given)
    finally:
        _read_only(given, False)
    err = capsys.readouterr().err
    assert after == before, f"{folder}/{name} {label}: the report changed its input"
    if code == 0:
        if folder != "run":
            page = (tmp_path / "out" / "index.html").read_text()
            assert TITLE[folder] in page and "Traceback" not in page
            if name == "audit.csv":  # recomputed from the rows, and the edit said
                assert "audit.csv as found differs" in page
    else:
        lines = err.strip().splitlines()
        # attnlab ends a refused input with status 1, argparse a bad command line with 2 (attnlab.cli)
        assert code in (1, 2) and len(lines) == 1 and "Traceback" not in err, f"{folder}/{name} {label}: {err!r}"
        assert given.name in lines[0] or name in lines[0], f"{folder}/{name} {label}: {lines[0]!r} names no file"


def _audits(world: Path, root: Path) -> Path:
    """A folder holding two audits (copies of the table's), as a user gathers them."""
    for name in ("a1", "a2"):
        shutil.copytree(world / "audit", root / name)
    return root


def test_the_report_writes_only_under_out_never_into_its_input_nor_through_a_link(world, tmp_path, capsys):
    given = _audits(world, tmp_path / "D")
    results = tmp_path / "results"  # `ln -s ~/results D/compare_audit`
    results.mkdir()
    (results / "prevalence_by_model.csv").write_text("mine\n")
    (given / "compare_audit").symlink_to(results)
    before, theirs = _snapshot(given), _snapshot(results)
    assert run_within(["report", str(given), "--out", str(tmp_path / "out")]) == 0
    assert (
        _snapshot(given) == before
        and _snapshot(results) == theirs
        and sorted(results.iterdir()) == [results / "prevalence_by_model.csv"]
    )
    compared = pd.read_csv(tmp_path / "out" / "compare_audit" / "prevalence_by_model.csv")
    assert len(compared) == 2 * len(pd.read_csv(given / "a1" / "audit.csv"))
    # --out is never an input, inside one, holding one, a link, or a user's folder
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    for out, words in (
        (given, "which the report reads"),
        (given / "a1" / "page", "which the report reads"),
        (tmp_path, "which the report reads"),
        (tmp_path / "link", "symbolic link"),
        (tmp_path / "mine", "did not write"),
        (tmp_path / "page.html", "give a folder"),
    ):
        capsys.readouterr()
        assert run_within(["report", str(given), "--out", str(out)]) == 1
        assert words in capsys.readouterr().err, out
    assert _snapshot(given) == before and not (tmp_path / "elsewhere").exists()
    assert _snapshot(tmp_path / "mine") == {"notes.txt": b"mine"}


def test_an_edited_table_is_recomputed_and_the_page_says_what_it_recomputed(world, tmp_path):
    given = tmp_path / "audit"
    shutil.copytree(world / "audit", given)
    table = pd.read_csv(given / "audit.csv")
    true = table.loc[0, "unsafe %"]
    table.loc[0, "unsafe %"] = 12.345
    table.to_csv(given / "audit.csv", index=False)
    assert run_within(["report", str(given), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    shown = pd.read_csv(tmp_path / "out" / "folders" / "audit" / "audit.csv")
    assert shown.loc[0, "unsafe %"] == pytest.approx(true) and "12.35" not in page
    assert "audit.csv as found differs" in page and "every number below is recomputed" not in page
    assert "recomputed by <code>attnlab report</code> from a copy" in page and "shown as found" not in page
    assert f"folder <code>{given}</code>" in page  # the page names the folder given, not its copy
