"""The card's three answers carry the card's own numbers and the label its rule gave: the recipe rule's reading (not
checked when softmax cannot do the task, a tie underpowered below 80% simulated power), the ablation's and the
temperature finding's verdicts; a card without a panel answers "not read" instead of failing."""

from __future__ import annotations

import dataclasses

import pytest

from attnlab.cards.answers import NOT_READ, answers, context, heads, swap
from attnlab.cards.types import Card, Multiplier


@pytest.fixture(scope="module")
def card(written) -> Card:
    return Card.from_dict(written.data)


def _best(card: Card, **change) -> Card:
    best = dataclasses.replace(card.substitution.best, **change)
    return dataclasses.replace(card, substitution=dataclasses.replace(card.substitution, best=best))


def test_three_answers_each_linked_to_a_panel_of_the_page(card):
    from attnlab.cards.page import PANELS

    found = answers(card)
    assert [a.key for a in found] == ["swap", "heads", "context"]
    assert all(a.panel in PANELS and a.sentence.endswith(".") and a.question.endswith("?") for a in found)


@pytest.mark.parametrize(
    "change, label, words",
    [
        ({"reading": "not read: softmax itself scores 50.0%", "softmax": 50.0}, "not checked", "Not decided"),
        ({"reading": "best: relu_p4_bauto 90.0%", "ahead": True, "power": 0.95}, "best", "keeps NIAH best"),
        ({"reading": "tied: a, b", "ahead": False, "power": 0.9}, "tied", "No recipe is ahead"),
        ({"reading": "no recipe preserves NIAH here", "ahead": False, "power": 0.9}, "none preserves", "No recipe"),
        ({"reading": "tied: a, b", "ahead": False, "power": 0.5}, "underpowered", "in 50% of simulated runs"),
        ({"reading": "no recipe preserves NIAH here", "ahead": False, "power": 0.2}, "none preserves", "in 20% of"),
    ],
)
def test_the_swap_answer_reads_the_recipe_rule(card, change, label, words):
    changed = _best(card, accuracy=40.0, lo=10.0, hi=70.0, softmax_lo=20.0, softmax_hi=80.0, **change)
    answer = swap(changed)
    assert answer.label == label and words in answer.sentence
    assert "40.0% [10.0, 70.0]" in answer.sentence


def test_the_heads_answer_takes_the_costliest_k_and_the_ablation_verdict(card):
    answer = heads(card)
    assert answer.label == card.ablation.finding.verdict
    worst = min(card.ablation.rows, key=lambda r: (r["top pp"], r["k"]))
    assert f"top-{worst['k']} heads" in answer.sentence and f"{worst['top pp']:+.1f} pp" in answer.sentence


def test_the_context_answer_reads_past_the_window_first_with_the_multiplier(card):
    m = Multiplier(target=2048, xi=0.5, m=1.2, m_lo=1.1, m_hi=1.3)
    answer = context(dataclasses.replace(card, temperature=dataclasses.replace(card.temperature, multiplier=m)))
    past = card.temperature.past
    assert answer.label == past.finding.verdict
    assert f"past the window xi_hat_Lambda = {past.xi_hat:.2f} [{past.lo:.2f}, {past.hi:.2f}]" in answer.sentence
    assert "m = max(1, log n / log 512)^xi = 1.200 [1.100, 1.300] at n = 2048" in answer.sentence


def test_a_card_without_its_panels_answers_not_read(card):
    bare = dataclasses.replace(card, ablation=None, length=None, temperature=None)
    assert [a.label for a in answers(bare)][1:] == [NOT_READ, NOT_READ]
    assert "not run" in heads(bare).sentence and "No temperature exponent" in context(bare).sentence
