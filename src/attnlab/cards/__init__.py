"""The one-page card on a checkpoint's attention: ``build`` (the plan and the card's data from the in-memory API,
``attnlab.card``), ``panels`` (the ablation, length and temperature panels with their findings), ``page`` (the
HTML page and its figures) and ``compare`` (several cards side by side). Above the studies, whose rules it reuses;
the API never imports it."""

from attnlab.cards.build import PLANS, CardError, CardPlan, card

__all__ = ["PLANS", "CardError", "CardPlan", "card"]
