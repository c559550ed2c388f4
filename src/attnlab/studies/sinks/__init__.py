"""The ``sinks`` study (Attention Sinks Essential): attention sinks on trigger-conditional averaging, softmax against
ReLU attention. Does softmax attention trained on that task park its mass on BOS at every position before the trigger
(Theorem 1; some position of some layer, Theorem 2), while ReLU attention solves it without a sink (Theorem 3)? And,
given ``--model``, does a pretrained softmax LM park its attention on its first token?

One module per part: ``calibration``, ``findings``, ``measures``, ``plan``, ``real``, ``section``, ``study``.
Importing the package registers the study and its rules' calibrations."""

# theorem3_model: the guide and the Theorem 3 table's caption cite it here
from attnlab.studies.sinks import (
    calibration,  # noqa: F401  (registers the rules' calibrations)
    claims,  # noqa: F401  (registers the paper's claims table)
)
from attnlab.studies.sinks.measures import theorem3_model
from attnlab.studies.sinks.study import BUDGETS, STUDY, compute, summarize

__all__ = ["BUDGETS", "STUDY", "compute", "summarize", "theorem3_model"]
