"""The studies, one module per source paper, and the runner that runs, summarizes and reports them
(``attnlab study NAME``, ``attnlab report``, ``attnlab demo``)."""

from .runner import (BUDGETS, STUDIES, Study, StudyConfig, StudyError, comparisons, demo_plan, load_config,
                     read_config, report, run, section, study_folders, summarize, write_page)

__all__ = ["BUDGETS", "STUDIES", "Study", "StudyConfig", "StudyError", "comparisons", "demo_plan", "load_config",
           "read_config", "report", "run", "section", "study_folders", "summarize", "write_page"]
