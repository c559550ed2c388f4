"""The ``lengthgen`` study (Vasylenko et al. 2025 §5.1, Table 1): trained at one range of lengths, which row maps still
solve a synthetic task at multiples of it, and do their attention rows disperse as the row grows (§3.2,
non-dispersion)?

One module per part: ``calibration``, ``config``, ``experiment``, ``findings``, ``rule``, ``study``. Importing the
package registers the study and its rule's calibrations."""

from attnlab.studies.lengthgen import (
    calibration,  # noqa: F401  (registers the rule's calibrations)
    claims,  # noqa: F401  (registers the paper's claims table)
)
from attnlab.studies.lengthgen.study import BUDGETS, STUDY, compute, summarize

__all__ = ["BUDGETS", "STUDY", "compute", "summarize"]
