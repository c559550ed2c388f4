"""The one-page card on a checkpoint's attention: ``types`` (``Card`` and its panels, typed, with card.json's
schema), ``build`` (the plan and the typed card from the in-memory API; ``attnlab.card`` gives it as a dict),
``panels`` (the ablation, length and temperature panels with their findings), ``rules`` (the findings' decision
rules as pure functions of counts), ``calibration`` (those rules' false-positive rates, power and coverage at each
plan, registered for ``attnlab verdicts``), ``page`` (the HTML page and its figures) and ``compare`` (several cards
side by side). Above the studies, whose rules it reuses; the API never imports it."""

from attnlab.cards import calibration
from attnlab.cards.build import PLANS, CardPlan, card
from attnlab.cards.types import SCHEMA, Card, CardError

calibration.register_plans(PLANS)

__all__ = ["PLANS", "SCHEMA", "Card", "CardError", "CardPlan", "card"]
