"""The ``temperature`` study (Hayase & Karakida 2026): does the growth exponent xi_Lambda of the upper-tail accumulation
scale, read off a trained model"s attention scores alone, land on the same side of 1 as the exponent of the inverse
temperature that the same model learned, where an untrained model and i.i.d. scores do not?

One module per part: ``calibration``, ``findings``, ``plan``, ``real``, ``rules``, ``section``, ``study``. Importing
the package registers the study and its rules' calibrations."""

from attnlab.studies.temperature import (
    calibration,  # noqa: F401  (registers the rules' calibrations)
    claims,  # noqa: F401  (registers the paper's claims table)
)
from attnlab.studies.temperature.study import BUDGETS, STUDY, compute, summarize

__all__ = ["BUDGETS", "STUDY", "compute", "summarize"]
