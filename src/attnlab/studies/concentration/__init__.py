"""The ``concentration`` study ("When Does Polynomial Attention Concentrate?", cited as Polynomial Concentration): when
does polynomial attention concentrate like softmax?

One module per part: ``findings``, ``plan``, ``section``, ``study``, ``train``. Importing the package registers the
study."""

from attnlab.studies.concentration.study import BUDGETS, STUDY, compare, compute, summarize

__all__ = ["BUDGETS", "STUDY", "compare", "compute", "summarize"]
