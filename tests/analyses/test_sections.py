"""attnlab report reads the folders the checkpoint commands write: each gets a section of its tables, the bound validation is recomputed from the audit's rows, and the section names the command line that made it."""

from __future__ import annotations

import shlex

import pandas as pd
import pytest

from attnlab import studies
from attnlab.analyses import audit, sections, substitute
from attnlab.cli import main


@pytest.fixture(scope="module")
def folders(checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    audit.run(
        audit.AuditConfig(model=str(checkpoint), prompts=2, pad=2, p=(2, 4), queries="every:4"),
        root / "audit",
        progress=False,
    )
    substitute.run(
        substitute.SubstituteConfig(model=str(checkpoint), recipes=("relu_p2_b0",), prompts=2, pad=1),
        root / "sub",
        progress=False,
    )
    (root / "notes").mkdir()
    return root


def test_each_command_folder_is_found_by_its_own_table(folders):
    assert sections.command_of(folders / "audit").name == "audit"
    assert sections.command_of(folders / "sub").name == "substitute"
    assert sections.command_of(folders / "notes") is None and sections.command_of(folders) is None
    assert studies.runner.command_folders(folders) == [folders / "audit", folders / "sub"]


def test_the_audit_section_recomputes_the_bound_validation_from_its_rows(folders):
    section = sections.section(folders / "audit")
    assert [t.stem for t in section.tables] == ["audit", "bound_validation"]
    got = pd.read_csv(folders / "audit" / "bound_validation.csv")
    rows = {b: pd.read_parquet(folders / "audit" / f"rows_b{b}.parquet") for b in ("0", "auto")}
    want = audit.bound_validation(rows, (2, 4))
    pd.testing.assert_frame_equal(got, want.astype(got.dtypes.to_dict()), check_exact=False)
    argv = shlex.split(section.command)
    assert argv[:2] == ["attnlab", "audit"] and argv[argv.index("--p") + 1 : argv.index("--p") + 3] == ["2", "4"]
    assert "--queries" in argv and argv[-2:] == ["--out", str(folders / "audit")] and "--suite" not in argv


def test_report_renders_a_page_over_command_folders(folders, capsys, tmp_path):
    assert main(["report", str(folders), "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert "Audit of" in page and "Substitution on" in page and "bound_validation.csv" in page
    assert "softmax itself scores" in page  # the tiny model cannot do niah: its deltas are flagged


def test_a_folder_with_neither_studies_nor_command_folders_is_refused(folders, tmp_path):
    with pytest.raises(studies.StudyError, match="holds no study folder"):
        studies.report([folders / "notes"], tmp_path / "x")


def test_several_audits_are_compared_side_by_side(checkpoint, folders, tmp_path):
    from checkpoints import save_checkpoint

    other = save_checkpoint(tmp_path / "other", seed=1)
    audit.run(
        audit.AuditConfig(model=str(other), prompts=2, pad=2, p=(2, 4), queries="every:4"),
        tmp_path / "a2",
        progress=False,
    )
    got = sections.comparisons([folders / "audit", tmp_path / "a2"], tmp_path / "page")
    ((section, where),) = got
    assert where == tmp_path / "page" / "compare_audit" and section.title == "Audits side by side"
    table = pd.read_csv(where / "prevalence_by_model.csv", dtype={"b": str})
    for folder, model in ((folders / "audit", str(checkpoint)), (tmp_path / "a2", str(other))):
        own = pd.read_csv(folder / "audit.csv", dtype={"b": str})
        mine = table[table["model"] == model]
        assert mine["unsafe %"].tolist() == own["unsafe %"].tolist() and set(mine["suite"]) == {"niah"}
    assert sections.comparisons([folders / "audit", folders / "sub"], tmp_path / "page2") == []


def test_an_ablate_folder_gets_its_ablation_curves(checkpoint, tmp_path):
    from attnlab.analyses import ablate

    ablate.run(
        ablate.AblateConfig(
            model=str(checkpoint),
            k=(1, 2),
            random_draws=2,
            rank_prompts=2,
            rank_length=40,
            prompts=2,
            pad=1,
            recipe="relu_p2_b0",
            b="0",
        ),
        tmp_path / "ab",
        progress=False,
    )
    section = sections.section(tmp_path / "ab")
    assert [f.stem for f in section.figures] == ["ablation"] and (tmp_path / "ab" / "ablation.png").is_file()
