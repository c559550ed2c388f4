"""The ``specialization`` study (Zhu et al. 2026 §2-§5, Table 1, App. C-G): does slowing the upper half"s W_Q and W_K
early in pretraining (learning-rate multiplier 0.25 until the lower-copy maturity rule releases it) improve the final
validation loss, and does a gated FFN shrink that gain?

One module per part: ``calibration``, ``findings``, ``plan``, ``rules``, ``study``, ``tables``. Importing the package
registers the study and its rules' calibrations."""

from attnlab.studies.specialization import (
    calibration,  # noqa: F401  (registers the rules' calibrations)
    claims,  # noqa: F401  (registers the paper's claims table)
)
from attnlab.studies.specialization.study import BUDGETS, STUDY, compute, summarize

__all__ = ["BUDGETS", "STUDY", "compute", "summarize"]
