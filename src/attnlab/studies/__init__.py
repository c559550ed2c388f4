"""The studies, one module per source paper, and the generic runner that computes, summarizes and
reports them (``attnlab study NAME``, ``attnlab report``, ``attnlab demo``).

Every study module has one shape: a docstring with its question; ``BUDGETS`` (the smoke and full
settings, and a reduced demo one where the study declares ``demo=True``); ``compute(cfg, folder, progress)``; the
functions that read its tables back and the findings
that decide its verdicts; ``summarize(folder) -> Section`` with the question and the captions; an
optional ``compare``; and, at its bottom, its registry entry ``STUDY = register(Study(...))``. A study of
one's own registers the same way: ``attnlab.studies.register(Study(name=..., ...))``.
"""

from attnlab.studies.runner import (
    BUDGETS,
    DEMO,
    STUDIES,
    Study,
    StudyConfig,
    StudyError,
    check_demo_folder,
    comparisons,
    demo_budget,
    demo_plan,
    load_config,
    read_config,
    register,
    report,
    run,
    section,
    study_folders,
    summarize,
    write_page,
)

__all__ = [
    "BUDGETS",
    "DEMO",
    "STUDIES",
    "Study",
    "StudyConfig",
    "StudyError",
    "check_demo_folder",
    "comparisons",
    "demo_budget",
    "demo_plan",
    "load_config",
    "read_config",
    "register",
    "report",
    "run",
    "section",
    "study_folders",
    "summarize",
    "write_page",
]

# Imported for their registration, in the order the registry (and so the demo and the report) lists them.
# isort: off
from attnlab.studies import rowmaps, concentration, lengthgen, specialization, temperature, sinks  # noqa: E402, F401
# isort: on
