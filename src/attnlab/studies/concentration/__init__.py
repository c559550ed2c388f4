"""The ``concentration`` study ("When Does Polynomial Attention Concentrate?", cited as Polynomial Concentration): when
does polynomial attention concentrate like softmax?

One module per part: ``calibration``, ``findings``, ``plan``, ``rules``, ``section``, ``study``, ``train``. Importing
the package registers the study and its rules' calibrations at every budget."""

from attnlab.studies.concentration import (
    calibration,
    claims,  # noqa: F401  (registers the paper's claims table)
)
from attnlab.studies.concentration.plan import REAL
from attnlab.studies.concentration.study import BUDGETS, STUDY, compare, compute, summarize

calibration.register_budgets(BUDGETS, REAL)

__all__ = ["BUDGETS", "STUDY", "compare", "compute", "summarize"]
