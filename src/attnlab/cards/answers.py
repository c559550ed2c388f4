"""The three questions a card answers first, each in one sentence with its number, interval and label.

Can softmax be swapped here, and for what (the recipe panel, Polynomial Concentration §5.3, §5.5)? Which heads
matter (the ablation panel, §5.4)? How will attention behave at longer context, and which temperature law extends it
(the length panel, App. C, and the temperature panel, Hayase & Karakida 2026 §4.5, App. A.2)? Words only: every
number is read from the typed card, and every label is the one its panel's calibrated rule gave.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.cards.types import Card, TemperatureFit
from attnlab.findings.finding import POWER_MIN

NOT_READ = "not read"  # a panel the card has no numbers for (an older card, a model with no window)


@dataclass(frozen=True)
class Answer:
    """One of the card's three answers: ``question`` as a user asks it, ``sentence`` with the number and its 95%
    interval, ``label`` (a finding's verdict, or the recipe rule's reading: best, tied, none preserves) and
    ``panel``, the title of the panel that holds the numbers."""

    key: str
    question: str
    sentence: str
    label: str
    panel: str

    def __str__(self) -> str:
        return f"{self.question} {self.sentence} [{self.label}]"


def answers(card: Card) -> tuple[Answer, Answer, Answer]:
    """The card's three answers, in the order the page shows them: swap, heads, context."""
    return swap(card), heads(card), context(card)


def with_interval(value, lo, hi, unit: str = "%", digits: int = 1) -> str:
    """``value`` with its interval as the card prints it, ``66.8% [65.2, 68.2]``; '-' for a missing value."""
    if value is None:
        return "-"
    if lo is None or hi is None:
        return f"{value:.{digits}f}{unit}"
    return f"{value:.{digits}f}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def swap(card: Card) -> Answer:
    """Whether a zero-shot recipe keeps NIAH accuracy, by ``cards.rules.RECIPE_RULE`` (Polynomial Concentration
    §5.3): the best recipe is named only when it is ahead of every other; a tie below 80% simulated power is
    underpowered."""
    question = "Can softmax be swapped here, and for what?"
    best = card.substitution.best
    if best is None or best.recipe is None:
        return Answer("swap", question, "No recipe was scored on this card.", NOT_READ, "Best zero-shot recipe")
    softmax = with_interval(best.softmax, best.softmax_lo, best.softmax_hi)
    highest = f"{best.recipe} answers {with_interval(best.accuracy, best.lo, best.hi)} of NIAH prompts"
    reading = best.reading or ""
    if reading.startswith("not read"):
        sentence = (
            f"Not decided: softmax itself answers {softmax} of NIAH prompts, too few to read a recipe's change "
            f"against (the highest, {highest})."
        )
        return Answer("swap", question, sentence, "not checked", "Best zero-shot recipe")
    delta = f"{best.delta_pp:+.1f} pp" if best.delta_pp is not None else "-"
    if best.ahead:
        label, head = (
            "best",
            f"{best.recipe} ({best.map}) keeps NIAH best: it answers {with_interval(best.accuracy, best.lo, best.hi)}",
        )
    elif reading.startswith("no recipe"):
        label, head = "none preserves", f"No recipe keeps NIAH: the highest, {highest}"
    else:
        label, head = "tied", f"No recipe is ahead of the others: the highest, {highest}"
    sentence = f"{head}, against softmax's {softmax} ({delta})."
    if best.power is not None and best.power < POWER_MIN:
        sentence += f" This many prompts find a recipe 50 pp ahead of the others in {best.power:.0%} of simulated runs."
        # a tie is a failure to tell recipes apart, which low power explains; a recipe ahead, or every recipe below
        # softmax, is a test that did reject
        label = "underpowered" if label == "tied" else label
    return Answer("swap", question, sentence, label, "Best zero-shot recipe")


def heads(card: Card) -> Answer:
    """The K at which polynomializing the top-K heads by median S_2 costs NIAH most, against random-K heads, with the
    ablation finding's verdict (Polynomial Concentration §5.4); the heads labelled sink and induction counted."""
    question = "Which heads matter?"
    labels = [str(h.get("labels")).split("+") for h in card.heads]  # a head counts under every label it carries
    sink, induction = (sum(t in held for held in labels) for t in ("sink", "induction"))
    counts = f"{sink} sink and {induction} induction heads of {len(labels)}"
    ab = card.ablation
    if ab is None or not ab.rows or ab.finding is None:
        return Answer("heads", question, f"The ablation was not run; the head map holds {counts}.", NOT_READ, "Heads")
    row = min(ab.rows, key=lambda r: (r["top pp"] if r["top pp"] is not None else float("inf"), r["k"]))
    k = row["k"]
    cell = next((c for c in ab.cells if c["k"] == k and c["subset"] == "top"), None)
    top = ", ".join([f"L{h['layer']}H{h['head']}" for h in ab.top[:3]] + (["..."] if len(ab.top) > 3 else []))
    change = "-" if row["top pp"] is None else f"{row['top pp']:+.1f} pp"
    accuracy = f", {with_interval(cell['accuracy %'], cell['lo'], cell['hi'])} of NIAH prompts" if cell else ""
    random = row.get("random mean pp")
    against = f", against {random:+.1f} pp for random-{k} heads" if random is not None else ""
    sentence = (
        f"giving {ab.recipe} to the top-{k} heads by median S_2 ({top}) moves NIAH accuracy {change}{accuracy}"
        f"{against}; the map holds {counts}."
    )
    sentence = f"Not decided: {sentence}" if ab.finding.verdict == "not checked" else sentence[0].upper() + sentence[1:]
    return Answer("heads", question, sentence, ab.finding.verdict, "Ablation")


def _fit(card: Card) -> tuple[str, TemperatureFit] | None:
    """The temperature reading the claim is about: past the window where read (Hayase & Karakida Table 2 reads
    there), else inside it."""
    heat = card.temperature
    if heat is None:
        return None
    for part in ("past", "inside"):
        fit = getattr(heat, part)
        if fit is not None and fit.xi_hat is not None:
            return part, fit
    return None


def _share(row) -> str:
    return with_interval(row["unsafe %"], row["unsafe lo"], row["unsafe hi"])


def context(card: Card) -> Answer:
    """The unsafe share at the shortest and longest prompt length read with the length finding's verdict (Polynomial
    Concentration App. C), and xi_hat_Lambda with the multiplier m(n; xi) it suggests at the target length (Hayase &
    Karakida 2026 §4.5, App. A.2); the label is the temperature finding's."""
    question = "How will it behave at longer context, and which temperature law extends it?"
    parts = []
    length = card.length
    if length is not None and length.rows:
        rows = sorted(length.rows, key=lambda r: r["L"])
        first, last = rows[0], rows[-1]
        verdict = length.finding.verdict if length.finding is not None else NOT_READ
        parts.append(
            f"inside its window the unsafe share of rows goes from {_share(first)} at L = {first['L']} to "
            f"{_share(last)} at L = {last['L']} (flat in L: {verdict})"
        )
    picked = _fit(card)
    label = NOT_READ
    if picked is None:
        parts.append("no temperature exponent was read")
    else:
        part, fit = picked
        label = fit.finding.verdict if fit.finding is not None else NOT_READ
        xi = with_interval(fit.xi_hat, fit.lo, fit.hi, unit="", digits=2)
        parts.append(f"{part} the window xi_hat_Lambda = {xi}")
        heat = card.temperature
        m = heat.multiplier if heat is not None else None
        if m is not None and m.m is not None:
            parts[-1] += (
                f", which suggests scaling the logits by m = max(1, log n / log {heat.window})^xi = "
                f"{with_interval(m.m, m.m_lo, m.m_hi, unit='', digits=3)} at n = {m.target}"
            )
    sentence = "; ".join(parts) + "."
    return Answer("context", question, sentence[0].upper() + sentence[1:], label, "Temperature")
