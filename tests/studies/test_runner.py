"""The study framework resumes into its own folder only, recomputes sections from files, and reports them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from attnlab import studies
from attnlab.cli import main
from attnlab.cli.base import UserError
from attnlab.findings.finding import MDE, Finding, Null
from attnlab.report.sections import Figure, Section, Table
from attnlab.studies import StudyConfig, StudyError, runner
from checkpoints import save_checkpoint

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def claim(text: str, verdict: str, evidence: str) -> Finding:
    """A paper's claim as a study states it: with its rule, null control and MDE."""
    return Finding(
        text,
        verdict,
        evidence,
        rule="the rule",
        null=Null("the null", False, "its outcome"),
        mde=MDE(None, None, "", "no effect size applies"),
        reason="the reason" if verdict in ("not checked", "underpowered") else "",
    )


def test_registry_has_one_study_per_paper_and_every_module_defines_both_steps():
    from attnlab.papers import PAPERS

    cited = [key for s in studies.STUDIES.values() for key in s.source.split(", ")]
    assert set(cited) <= set(PAPERS), set(cited) - set(PAPERS)
    assert all(any(s.source == key for s in studies.STUDIES.values()) for key in PAPERS)
    for study in studies.STUDIES.values():
        compute, summarize = study.compute, study.summarize
        assert callable(compute) and callable(summarize), study.name
    assert list(studies.STUDIES)[0] == "rowmaps"


def test_every_study_module_has_the_one_shape_and_declares_its_own_entry():
    import ast
    import importlib
    import inspect

    assert list(studies.STUDIES) == ["rowmaps", "concentration", "lengthgen", "specialization", "temperature", "sinks"]
    for name, study in studies.STUDIES.items():
        package = importlib.import_module(f"attnlab.studies.{name}")
        # a paper's study is a package whose __init__ registers its study module; rowmaps is one module
        module = importlib.import_module(f"{package.__name__}.study") if hasattr(package, "__path__") else package
        assert module.STUDY is study is package.STUDY and study.name == name
        for doc in {module.__doc__, package.__doc__}:
            question = doc.split("\n\n")[0]
            assert name in question and "?" in question, name
        assert set(module.BUDGETS) == set(studies.BUDGETS) | ({studies.DEMO} if study.demo else set()), name
        assert studies.demo_budget(name) == (studies.DEMO if study.demo else "smoke")
        assert study.compute is module.compute and study.summarize is module.summarize, name
        assert study.compare is getattr(module, "compare", None), name
        body = ast.parse(inspect.getsource(module)).body
        defined = [n.name for n in body if isinstance(n, ast.FunctionDef)]
        assert defined.index("compute") < defined.index("summarize"), name
        last = body[-1]
        assert isinstance(last, ast.Assign) and last.targets[0].id == "STUDY", name


def _echo_study(name="echo", **changed):
    """A user's study: compute writes one number, summarize reads it back into a finding."""

    def compute(cfg, folder, progress):
        (folder / "n.txt").write_text(str(cfg.seed + 41))

    def summarize(folder):
        n = int((folder / "n.txt").read_text())
        return studies.section(
            name,
            folder,
            question="Is it 41?",
            findings=(claim("n is 41", "reproduced" if n == 41 else "not reproduced", str(n)),),
        )

    return studies.Study(
        **{
            "name": name,
            "title": "Echo",
            "source": "Zhu et al. 2026",
            "compute": compute,
            "summarize": summarize,
            **changed,
        }
    )


def test_a_users_study_registers_runs_and_reports_and_taken_names_are_refused(tmp_path):
    echo = studies.register(_echo_study())
    try:
        assert studies.STUDIES["echo"] is echo and list(studies.STUDIES)[-1] == "echo"
        section = studies.run(StudyConfig(study="echo"), tmp_path / "echo")
        assert section.findings[0].verdict == "reproduced" and section.source == "Zhu et al. 2026"
        assert studies.summarize(tmp_path / "echo") == section
        with pytest.raises(ValueError, match="study 'echo' is already registered; pass replace=True"):
            studies.register(_echo_study())
        with pytest.raises(ValueError, match="study 'rowmaps' is already registered"):
            studies.register(_echo_study("rowmaps"))
        other = studies.register(_echo_study(title="Echo 2"), replace=True)
        assert studies.STUDIES["echo"] is other
    finally:
        studies.STUDIES.unregister("echo")
    assert "echo" not in studies.STUDIES and studies.STUDIES["rowmaps"].title == "Row maps on one score row"
    with pytest.raises(StudyError, match="unknown study 'echo'"):
        StudyConfig(study="echo")


def test_a_study_must_cite_paper_keys_and_hand_over_functions():
    with pytest.raises(ValueError, match="cites '001.txt', not a paper key"):
        _echo_study(source="001.txt")
    with pytest.raises(ValueError, match="compute must be a function"):
        _echo_study(compute="train")
    with pytest.raises(TypeError, match="register takes a Study"):
        studies.register({"name": "echo"})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"study": "nope"}, "unknown study 'nope'"),
        ({"study": "temperature", "budget": "huge"}, "--budget must be one of smoke, full, demo"),
        ({"study": "sinks", "budget": "demo"}, "study 'sinks' has no demo budget .* the studies with one: lengthgen"),
        ({"study": "temperature", "seed": -1}, "--seed must be an int >= 0"),
        ({"study": "lengthgen", "model": "some/folder"}, "takes no --model"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs, message):
    with pytest.raises(StudyError, match=message):
        StudyConfig(**kwargs)


def test_command_line_rebuilds_the_config(tmp_path):
    cfg = StudyConfig(study="temperature", budget="full", seed=3)
    out = tmp_path / "my x"
    assert cfg.command(out) == f"attnlab study temperature --budget full --seed 3 --out '{out}'"
    precise = StudyConfig(study="temperature", budget="full", seed=3, dtype="float32", device="cpu")
    assert precise.command(out) == f"attnlab study temperature --budget full --seed 3 --dtype float32 --out '{out}'"


def test_a_study_under_torchrun_is_refused_before_it_claims_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(StudyError, match="start it without torchrun, which is for attnlab train"):
        studies.run(StudyConfig(study="rowmaps"), tmp_path / "rm")
    assert not (tmp_path / "rm").exists()


def test_a_study_resumes_on_another_device_or_launcher_but_not_in_another_dtype(tmp_path):
    folder = tmp_path / "rm"
    first = studies.run(StudyConfig(study="rowmaps"), folder)
    moved = StudyConfig(study="rowmaps", device="cpu", launcher="submitit", submitit={"timeout_min": 5})
    assert studies.run(moved, folder) == first
    with pytest.raises(StudyError, match="resume with that command"):
        studies.run(StudyConfig(study="rowmaps", dtype="bfloat16"), folder)
    saved = json.loads((folder / "config.json").read_text())
    assert (saved["device"], saved["dtype"], saved["launcher"]) == ("auto", "auto", "local")


def test_rerun_resumes_and_a_different_config_or_foreign_folder_is_refused(tmp_path):
    folder = tmp_path / "rm"
    first = studies.run(StudyConfig(study="rowmaps"), folder)
    row = (folder / "row.json").stat().st_mtime_ns
    again = studies.run(StudyConfig(study="rowmaps"), folder)
    assert again == first
    assert (folder / "row.json").stat().st_mtime_ns == row, "the finished computation ran again"
    with pytest.raises(StudyError, match="resume with that command"):
        studies.run(StudyConfig(study="rowmaps", seed=1), folder)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(StudyError, match="not empty and holds no study"):
        studies.run(StudyConfig(study="rowmaps"), foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_summarize_recomputes_from_the_files(tmp_path):
    folder = tmp_path / "rm"
    studies.run(StudyConfig(study="rowmaps"), folder)
    (folder / "rowmaps.csv").unlink()
    (folder / "section.json").unlink()
    section = studies.summarize(folder)
    assert (folder / "rowmaps.csv").is_file()
    assert Section.from_dict(json.loads((folder / "section.json").read_text())) == section
    assert section.findings[0].verdict == "check passed"


def _fake_study(folder, verdict="not reproduced"):
    """A study folder by hand: a table, a figure and a section pointing at them."""
    import matplotlib.pyplot as plt

    from attnlab.report.figures import save_figure

    folder.mkdir(parents=True)
    pd.DataFrame({"variant": ["b", "a"], "score": [1.5, 99.0]}).to_csv(folder / "t.csv", index=False)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, folder / "f")
    return Section(
        study="sinks",
        title="Sinks <b>",
        source="Attention Sinks Essential",
        question="q?",
        command="attnlab study sinks",
        findings=(claim("claim & more", verdict, "0.93 vs 0.02"),),
        tables=(Table("t", "the table"),),
        figures=(Figure("f", "the figure"),),
        notes=("a note",),
    )


def test_page_is_self_contained_escaped_and_shows_every_part(tmp_path):
    from attnlab.report.html import render

    section = _fake_study(tmp_path / "s")
    page = render([(section, tmp_path / "s")], title="T")
    assert "data:image/png;base64," in page and "<img" in page
    assert 'src="http' not in page and "<link" not in page
    assert "Sinks &lt;b&gt;" in page and "claim &amp; more" in page
    assert page.count('class="finding not-reproduced"') == 1
    assert '<td class="num">99</td>' in page and '<td class="text">b</td>' in page
    assert "attnlab report" in page and "a note" in page and "the figure" in page


def test_an_identity_is_labelled_a_check_in_the_verdict_table_not_a_reproduced_finding(tmp_path):
    from attnlab.findings.finding import CHECK_VERDICTS
    from attnlab.report.html import render

    rowmaps = studies.run(StudyConfig(study="rowmaps"), tmp_path / "rm")
    (check,) = rowmaps.findings
    assert check.verdict in CHECK_VERDICTS and check.is_check and check.verdict == "check passed"
    paper = _fake_study(tmp_path / "s", verdict="reproduced")
    assert not paper.findings[0].is_check
    page = render([(rowmaps, tmp_path / "rm"), (paper, tmp_path / "s")], title="T")
    found = page[page.index("<h3>Findings</h3>") : page.index("<h3>Software checks</h3>")]
    checks = page[page.index("<h3>Software checks</h3>") : page.index("</tbody>", page.index("<h3>Software checks"))]
    assert '<td class="text check-passed">check passed</td>' in checks and "check passed" not in found
    assert '<td class="text">reproduced</td>' in found and found.count("reproduced") == 1
    assert page.count('class="finding check-passed"') == 1 and ".finding.check-passed" in page
    with pytest.raises(ValueError, match="verdict must be one of .*check passed, check failed"):
        Finding("c", "passed", "e")


def test_long_tables_are_cut_in_the_page_and_say_where_the_rest_is(tmp_path):
    from attnlab.report.html import MAX_ROWS, table_html

    csv = tmp_path / "long.csv"
    pd.DataFrame({"i": range(MAX_ROWS + 5)}).to_csv(csv, index=False)
    html = table_html(csv)
    assert html.count("<tr>") == MAX_ROWS + 1
    assert f"first {MAX_ROWS} of {MAX_ROWS + 5} rows" in html


def test_study_folders_finds_a_demo_folder_in_registry_order_and_rejects_others(tmp_path):
    for name in ("temperature", "rowmaps"):
        (tmp_path / "demo" / name).mkdir(parents=True)
        config = {"study": name, "budget": "smoke", "model": None, "seed": 0}
        (tmp_path / "demo" / name / "config.json").write_text(json.dumps(config))
    assert [p.name for p in studies.study_folders(tmp_path / "demo")] == ["rowmaps", "temperature"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(StudyError, match="holds no study folder"):
        studies.study_folders(tmp_path / "empty")
    with pytest.raises(StudyError, match="is not a folder"):
        studies.study_folders(tmp_path / "missing")


def test_demo_command_runs_studies_and_writes_the_report(tmp_path, capsys):
    assert main(["demo", "--studies", "rowmaps", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    page = tmp_path / "index.html"
    assert f"report: {page}" in out and "[check passed]" in out
    assert (tmp_path / "rowmaps" / "rowmaps.png").read_bytes()[:8] == PNG_MAGIC
    assert "Row maps on one score row" in page.read_text()
    report = tmp_path.parent / f"{tmp_path.name}-report"  # apart from the folders it reads
    assert main(["report", str(tmp_path / "rowmaps"), str(tmp_path), "--out", str(report)]) == 0
    assert (report / "index.html").read_text().count("<h2 ") == 2
    assert not list(tmp_path.rglob("*.tmp"))
    # a study folder holding a table named as a command's marker (concentration writes matched.csv) stays a study
    (tmp_path / "rowmaps" / "matched.csv").write_text("model\n")
    assert runner.command_folders(tmp_path) == []
    assert main(["report", str(tmp_path), "--out", str(report)]) == 0  # an earlier report's folder is replaced
    # the same demo resumes into its own folder, its page replaced; a user's folder at --out is never written into
    (tmp_path / "rowmaps" / "matched.csv").unlink()
    assert main(["demo", "--studies", "rowmaps", "--out", str(tmp_path), "--no-progress"]) == 0
    mine = tmp_path.parent / f"{tmp_path.name}-mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--out", str(mine)]) == 1
    assert "did not write" in capsys.readouterr().err and [p.name for p in mine.iterdir()] == ["notes.txt"]
    # nor the folder it reads, nor one inside it
    for inside in (tmp_path, tmp_path / "rowmaps" / "page"):
        assert main(["report", str(tmp_path), "--out", str(inside)]) == 1
        assert "which the report reads" in capsys.readouterr().err
    assert not (tmp_path / "rowmaps" / "page").exists()


def test_demo_refuses_a_folder_of_other_files_and_a_study_folder(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("mine")
    assert main(["demo", "--studies", "rowmaps", "--out", str(theirs), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "thesis.tex" in err and "did not write" in err and "Traceback" not in err
    assert sorted(p.name for p in theirs.iterdir()) == ["thesis.tex"]
    assert main(["study", "rowmaps", "--out", str(tmp_path / "one"), "--no-progress"]) == 0
    before = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert main(["demo", "--studies", "rowmaps", "--out", str(tmp_path / "one"), "--no-progress"]) == 1
    assert "folder of one study" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == before


def test_report_command_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):  # --out is required: nothing is written into the folders read
        main(["report", str(tmp_path)])
    assert "--out" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "x" / "page.html")]) == 1
    assert "give a folder" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--out", str(tmp_path.parent / f"{tmp_path.name}-out")]) == 1
    err = capsys.readouterr().err
    assert "holds no study folder" in err and "Traceback" not in err
    assert main(["study", "lengthgen", "--model", "x", "--out", str(tmp_path / "s")]) == 1
    assert "takes no --model" in capsys.readouterr().err


def test_demo_models_default_to_the_fetched_ones(monkeypatch, capsys):
    from attnlab import cli
    from attnlab.loading import fetch

    monkeypatch.setattr(fetch, "fetched", lambda name: "/x.gguf" if name == "gemma3" else None)
    assert cli.demo_models(None) == ["gemma3"]
    assert cli.demo_models(["none"]) == []
    with pytest.raises(UserError, match="--models my.gguf: model 'my.gguf' is neither a path"):
        cli.demo_models(["none", "my.gguf"])  # a given model is checked before any study runs
    monkeypatch.setattr(fetch, "fetched", lambda name: None)
    assert cli.demo_models(None) == []
    assert "attnlab fetch smollm2 adds them" in capsys.readouterr().out


def test_a_bad_model_is_refused_before_the_folder_is_claimed(tmp_path, capsys):
    """A missing path or a folder without a tokenizer is one line, and the corrected command is not then
    refused as a resume of another configuration."""
    no_weights = tmp_path / "config_only"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    no_tokenizer = save_checkpoint(tmp_path / "no_tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (no_tokenizer / name).unlink(missing_ok=True)
    capsys.readouterr()
    out = tmp_path / "study"
    for model, message in (
        (tmp_path / "missing", "neither a path nor a known model name"),
        (no_weights, "has no weights"),
        (no_tokenizer, "has no usable tokenizer"),
    ):
        assert main(["study", "concentration", "--model", str(model), "--out", str(out), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
        assert not (out / "config.json").exists()


def test_a_study_on_a_model_records_where_the_model_came_from(tmp_path):
    from attnlab import hooks

    model = save_checkpoint(tmp_path / "model")
    cfg = StudyConfig(study="concentration", model=str(model))
    runner._claim(cfg, tmp_path / "study")
    saved = runner.read_config(tmp_path / "study")
    assert saved["model"] == str(model) and saved["model_path"] == str(model.resolve())
    assert saved["model_sha256"] == hooks.provenance(model)["model_sha256"]
    runner._claim(cfg, tmp_path / "study")  # the recorded provenance does not stop a resume
