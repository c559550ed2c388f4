"""The one-page card on a checkpoint's attention: ``types`` (``Card`` and its panels, typed, with card.json's
schema and the ``FORMATS`` a card saves as), ``build`` (the plan and the typed card from the in-memory API, as
``attnlab.card`` gives it), ``panels`` (the ablation, length and temperature panels with their findings), ``rules``
(the findings' decision rules as pure functions of counts), ``calibration`` (those rules' false-positive rates, power
and coverage at each plan, registered for ``attnlab verdicts``), ``answers`` (the three questions the card answers
first), ``page`` (the HTML page and its figures), ``markdown`` (card.md, a Hub model card's section) and ``compare``
(several cards side by side). Above the studies, whose rules it reuses; the API never imports it."""

from attnlab.cards import calibration, markdown, page  # noqa: F401  (page and markdown register their formats)
from attnlab.cards.answers import Answer, answers
from attnlab.cards.build import PLANS, CardPlan, card
from attnlab.cards.types import FORMATS, SCHEMA, SCHEMA_FILE, Card, CardError

calibration.register_plans(PLANS)

__all__ = ["FORMATS", "PLANS", "SCHEMA", "SCHEMA_FILE", "Answer", "Card", "CardError", "CardPlan", "answers", "card"]
