"""Every numbered result of Attention Sinks Essential ("Attention Sinks Are Functionally Essential in Softmax
Transformers: Theoretical Evidence") and what attnlab does with it. The paper proves that a softmax attention model
solving trigger-conditional averaging must put its weight on BOS before the trigger (Theorem 1 for one layer,
Theorem 2 with depth), builds a ReLU attention model that solves the task with no sink (Theorem 3), and shows
trained models doing the same (Figs. 2-6). Each theorem, lemma and figure is one ``Claim`` below, in the paper's
order: the sinks study's findings decide the theorems' predictions on trained models of the paper's own size and
Theorem 3's construction, and a pretrained LM's first-token mass stands in for Fig. 1; the lemmas are steps of the
proofs, which no run decides.
"""

from __future__ import annotations

from attnlab.studies.claims import Claim, register

PAPER = "Attention Sinks Essential"

# The recorded run: the demo's sinks study at its smoke budget (the models are the paper's own size; smoke and
# full differ in learning rate and seeds, not in scale).
DEMO = (
    "demo: attnlab demo on 2 CPU cores (attnlab study sinks --budget smoke --model smollm2: n = L = 16, lr 1e-2, "
    "2 seeds of 1x1 and 2x2 and one 4x4 seed per attention; App. A's lr 1e-3 and 3 seeds are --budget full, "
    "22 min on one CPU thread)"
)
DEMO_REAL = (
    "demo: attnlab demo on 2 CPU cores (attnlab study sinks --model smollm2: SmolLM2-135M's first-token mass over "
    "4 documents of 256 tokens)"
)
LEMMA = "none: a step of a proof; nothing to run"


def _lemma(theorems: str) -> str:
    """Why no run decides a lemma of the proof of ``theorems``."""
    return (
        f"a lemma of the proof of {theorems}: a mathematical statement, which no trained model decides, and no "
        "test in attnlab checks it as a property"
    )


CLAIMS = register(
    Claim(
        PAPER,
        "Fig. 1",
        "§1-2",
        "A head of a pretrained softmax LM (Gemma 7B's apostrophe head, reproduced from Barbero et al. 2025) fires "
        "on a trigger and otherwise puts its weight on BOS, as a no-op default.",
        findings=("sinks: a pretrained LM's first-token sink",),
        budget=DEMO_REAL,
    ),
    Claim(
        PAPER,
        "Theorem 1",
        "§3.5, App. C",
        "For any eps, delta > 0, L >= 4, n >= 5 there is an eta > 0 such that every one-layer softmax attention "
        "model with l-inf loss <= eta puts alpha_(i,1) >= 1 - eps on BOS at every pre-trigger position 1 < i < j, "
        "with probability >= 1 - delta over inputs.",
        findings=("sinks: sink at every position (Theorems 1-2), 1x1", "sinks: masking BOS"),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Theorem 2",
        "§3.5, App. D",
        "In the setting of Theorem 1, a D-layer softmax attention model with small loss has at least one layer d "
        "and position 1 < i < j with alpha_(i,1)^(d) >= 1 - eps.",
        findings=(
            "sinks: sink at every position (Theorems 1-2), 2x2",
            "sinks: sink at every position (Theorems 1-2), 4x4",
            "sinks: masking BOS",
        ),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Theorem 3",
        "§3.5, App. E",
        "For any delta > 0, L >= 4, n >= 3 a one-layer ReLU attention model (W_K = W_V = W_O = I, W_Q = e_2 e_n^T, "
        "scores divided by max(i - 2, 1)) has loss <= delta (in fact zero) and alpha_(i,1) = 0 at every position "
        "i != j.",
        findings=("sinks: Theorem 3's ReLU construction",),
        budget="demo: attnlab demo on 2 CPU cores (the study's check of the App. E weights on held-out inputs)",
    ),
    Claim(
        PAPER,
        "Fig. 2",
        "§4.1",
        "A trained one-layer one-head softmax model puts near-unit mass on BOS at every query before the trigger "
        "(j = 8, L = 16, mean and sd over 1000 test inputs, negligible variance), while the ReLU model's BOS mass "
        "stays near zero.",
        findings=("sinks: sink at every position (Theorems 1-2), 1x1",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Fig. 3",
        "§4.2",
        "In a trained 2-layer 2-head softmax model with residual connections every head sinks on BOS before the "
        "trigger (one random input, j = 8).",
        findings=("sinks: a sink head in every layer, 2x2", "sinks: sink at every position (Theorems 1-2), 2x2"),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Fig. 4",
        "App. B.1",
        "In a trained 2-layer 2-head ReLU attention model with residual connections no head sinks: the weight on "
        "BOS stays near zero in every layer and head.",
        findings=("sinks: sink at every position (Theorems 1-2), 2x2",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Fig. 5",
        "App. B.2",
        "In a trained 4-layer 4-head softmax model at least one head of every layer sinks on BOS before the "
        "trigger (one representative input).",
        findings=("sinks: a sink head in every layer, 4x4",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Fig. 6",
        "App. B.2",
        "In a trained 4-layer 4-head ReLU attention model no layer sinks: the weight on BOS stays near zero.",
        findings=("sinks: sink at every position (Theorems 1-2), 4x4",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Lemma 1",
        "App. F",
        "In a one-layer model with loss <= eta, the value of BOS is small: ||W_O W_V e_1|| <= eta (position 1 "
        "attends only to itself and its target is 0).",
        reason=_lemma("Theorem 1"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 2",
        "App. F",
        "For a fixed query and key sets S subset of T, softmax over T gives every key of S at most the weight "
        "softmax over S gives it.",
        reason=_lemma("Theorem 1"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 3",
        "App. F",
        "In a softmax row the self weight alpha_(i,i) is at most its weight in the prefix (BOS, x_i), and "
        "alpha_(h,i) is at most its weight in the prefix (BOS, x_i, x_h) (by Lemma 2).",
        reason=_lemma("Theorem 1"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 4",
        "App. F",
        "A one-layer softmax model with loss <= eta has ||alpha_(i,i) V x_i|| <= 2 eta at every pre-trigger position.",
        reason=_lemma("Theorem 1"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 5",
        "App. F",
        "A one-layer softmax model with loss <= eta has ||alpha_(h,i) V x_i|| <= 4 eta for every pair of "
        "pre-trigger positions 1 < i < h < j.",
        reason=_lemma("Theorem 1"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 6",
        "App. F",
        "For i.i.d. coordinates with a density bounded by M and a set E of probability >= delta, every coordinate "
        "has two points of E that differ only there, by at least eps' = delta / 2M.",
        reason=_lemma("Theorems 1 and 2"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 7",
        "App. F",
        "A D-layer causal softmax model's output at position i is a convex combination sum_k beta_(i,k) V x_k of the "
        "inputs under the product V = V^(D) ... V^(1) of the layers' value maps.",
        reason=_lemma("Theorem 2"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 8",
        "App. F",
        "In that decomposition beta_(2,2) is the product over layers of alpha_(2,2)^(d).",
        reason=_lemma("Theorem 2"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 9",
        "App. F",
        "A D-layer model with loss <= eta has ||V e_1|| <= eta.",
        reason=_lemma("Theorem 2"),
        budget=LEMMA,
    ),
    Claim(
        PAPER,
        "Lemma 10",
        "App. F",
        "A D-layer softmax model with loss <= eta has ||beta_(2,2) V x_2|| <= 2 eta on every input.",
        reason=_lemma("Theorem 2"),
        budget=LEMMA,
    ),
)
