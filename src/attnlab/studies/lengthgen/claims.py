"""The claims table of Vasylenko et al. 2025 (Long-Context Generalization with Sparse Attention): every numbered
result the paper reports (Lemmas 1-2, Propositions 1-8, Tables 1-17 and Figures 1-13, main text and appendices) as
one ``Claim``, saying which ``lengthgen`` finding decides it and at which budget, or why no attnlab run decides it
and what would. The theory is decided on synthetic rows by the study's checks (Lemma 2, Prop. 1, Prop. 3, with
Lemma 1's b_max rows) and its collapse and over-squashing probes (Prop. 2-4, Figs. 6-7); Table 1 by the three
trained-model findings, which the demo runs on Copy alone and ``--budget full`` runs at the paper's scale. The
per-task appendix tables and the language-model tables are not run here: their budgets are estimated from Table 5's
models and samples (App. G) and the 420M-parameter models of §5.2, by ``gpu_hours``' 6 N T rule.
"""

from __future__ import annotations

from attnlab.studies.claims import H100_FLOPS, UTILIZATION, Claim, gpu_hours, needs, register

PAPER = "Vasylenko et al. 2025"

COPY = "lengthgen: Copy positive control"
HEADLINE = "lengthgen: ASEntmax against softmax"
ENTMAX = "lengthgen: alpha-entmax against softmax"
THEORY = "lengthgen: non-dispersion"
COLLAPSE = "lengthgen: representational collapse"
GRADIENTS = "lengthgen: over-squashing gradient norms"
PATHS = "lengthgen: over-squashing active paths"

# Table 5 (App. G.1-G.2): task -> (its name, training rows, training lengths in the paper's units and what they
# count, heads, layers, hidden and intermediate width, tokens per unit of length: a Copy, Reverse or Sort row holds
# its m source tokens and their answer). Gemma 2 blocks with a gated FFN (App. G.2): about 4 d^2 + 3 d w per layer.
TABLE5_MODELS = {
    "2back": ("2Back", 10e6, (32, 64), "tokens", 8, 2, 256, 512, 1),
    "local_count": ("Local Count", 10e6, (64, 128), "tokens", 8, 3, 128, 512, 1),
    "flipflop": ("Flip-Flop", 10e6, (32, 64), "tokens", 8, 4, 256, 512, 1),
    "copy": ("Copy", 20e6, (32, 64), "source tokens", 16, 2, 256, 1024, 2),
    "reverse": ("Reverse", 30e6, (32, 64), "source tokens", 8, 6, 256, 512, 2),
    "mqmtar": ("MQMTAR", 50e6, (32, 64), "context tokens", 16, 4, 512, 1024, 1),
    "sort": ("Sort", 40e6, (32, 64), "source tokens", 8, 2, 256, 1024, 2),
}
SCORED_ROWS = 1000  # App. G.2: 1K rows per evaluation length
SEEDS = 3  # App. G.2: the best of 3 seeds (and several learning rates, not counted here) is reported
ESTIMATE = (
    f"6 N T FLOPs of training and 2 N n + 2 L n^2 d per scored row at {UTILIZATION:.0%} of an H100's bf16 peak, "
    "estimates; models this small run far below that peak"
)


def _hours(hours: float) -> str:
    """``hours`` as an estimate reads: "under 0.1", "about 2.5", "about 40"."""
    return "under 0.1" if hours < 0.1 else f"about {hours:,.1f}" if hours < 10 else f"about {hours:,.0f}"


def _cost(task: str, runs: int, lengths: tuple[int, ...]) -> tuple[float, float, float, float]:
    """(parameters, training tokens per run, H100-hours of training, H100-hours of scoring) of ``runs`` Table 5
    models of ``task``, each scored on ``SCORED_ROWS`` rows at every length in ``lengths`` (the paper's units)."""
    _, rows, (low, high), _, _, layers, d, width, per_unit = TABLE5_MODELS[task]
    params = layers * (4 * d * d + 3 * d * width)
    tokens = rows * per_unit * (low + high) / 2
    flops = sum(2 * params * n + 2 * layers * n * n * d for n in (per_unit * length for length in lengths))
    scoring = runs * SCORED_ROWS * flops / (H100_FLOPS * UTILIZATION) / 3600
    return params, tokens, runs * gpu_hours(params, tokens), scoring


def _synthetic(task: str, runs: int, lengths: tuple[int, ...], what: str) -> str:
    """The budget of ``runs`` trainings of Table 5's model for ``task`` (``what`` says which: rows x seeds), scored
    at ``lengths`` in the paper's units."""
    name, rows, (low, high), units, heads, layers, d, width, _ = TABLE5_MODELS[task]
    params, tokens, train, scoring = _cost(task, runs, lengths)
    scored = f"at {len(lengths)} lengths up to {max(lengths):,}" if len(lengths) > 1 else f"at {lengths[0]}"
    return (
        f"{runs} run{'s' if runs > 1 else ''} ({what}) of Table 5's {name} model ({layers} layers x {d}, {heads} "
        f"heads, FFN {width}: about {params / 1e6:.1f}M parameters) on {rows / 1e6:.0f}M rows of {low}-{high} "
        f"{units} (about {tokens / 1e9:.1f}B tokens each), scored on {SCORED_ROWS:,} rows {scored}: "
        f"{_hours(train)} H100-hours of training and {_hours(scoring)} of scoring ({ESTIMATE})"
    )


def _doubling(low: int, high: int) -> tuple[int, ...]:
    return tuple(low * 2**i for i in range(high.bit_length() - low.bit_length() + 1))


# What the recorded run trained (attnlab.studies.lengthgen.study BUDGETS["demo"]) and what the full budget trains:
# Table 1's four tasks at the paper's units and multiples, its five maps, 4 seeds each.
DEMO = "demo: attnlab demo on 2 CPU cores (attnlab study lengthgen --budget demo)"
DEMO_COPY = (
    f"{DEMO}: Copy alone, NAPE, trained at 16-32 source tokens, 2 layers x 8 heads x 64, 3,000 steps of 32 rows, "
    "softmax, alpha-entmax and ASEntmax, 3 seeds each, scored on 100 rows at 1x, 2x and 4x"
)
FULL_TASKS = {
    "mqmtar": (1, 2, 4, 16, 64, 256, 1024),
    "reverse": (1, 1.5, 2, 4, 8),
    "copy": (1, 2, 4, 8, 16, 32, 64),
    "sort": (1, 2, 4, 8),
}
FULL_RUNS = 5 * 4  # softmax, SSMax, top-K 32, alpha-entmax, ASEntmax x 4 seeds, per task
_FULL = [_cost(task, FULL_RUNS, tuple(int(64 * m) for m in mults)) for task, mults in FULL_TASKS.items()]
FULL = (
    "attnlab study lengthgen --budget full on a GPU: Table 5's models on MQMTAR (to 1024x), Reverse (8x), Copy "
    f"(64x) and Sort (8x), trained at 32-64 in the paper's units, 5 maps x 4 seeds per task ({4 * FULL_RUNS} runs), "
    f"scored on 1,000 rows per length: {_hours(sum(c[2] for c in _FULL))} H100-hours of training and "
    f"{_hours(sum(c[3] for c in _FULL))} of scoring ({ESTIMATE})"
)
TABLE1 = (
    f"{DEMO_COPY}: Copy within 4x, where Table 1 separates only alpha-entmax from softmax; its other separations "
    f"(Reverse to 4x, Sort, MQMTAR to 1024x) are decided by {FULL}"
)
CHECKS = (
    f"{DEMO}: the study's theory checks, 183 float64 rows of 16 to 65,536 keys with attnlab's own softmax and "
    "alpha-entmax row maps (attnlab.diagnostics.theory_checks), about 2 s"
)
COLLAPSE_PROBE = (
    f"{DEMO}: the study's representational-collapse probe, alpha 1, 1.5, 1.75 and 2, n to 4096 (--budget full: to "
    "16,384, Fig. 6's range), 10 random-prefix draws"
)
SQUASH_PROBE = (
    f"{DEMO}: the study's over-squashing probe, 8-layer decoders trained on a delayed copy at 256 tokens, softmax "
    "against alpha-entmax, paired by seed (far smaller and shorter trained than the paper's)"
)
UNCHECKED_PROOF = "none: a proof (no attnlab test checks it yet)"
NOTHING = "none: nothing to decide"
# §5.2, App. G.3: 420M-parameter LLaMA-3-style decoders (24 layers x 768, 12 heads), 13.5K steps of 524K tokens
# (7.1B tokens) of DCLM-Edu at context 2048, one per attention (softmax, SSMax, alpha-entmax, ASEntmax)
LM = "420M-parameter LLaMA-3-style decoders (24 layers x 768, 12 heads), one per attention map"
LM_DATA = "7.1B DCLM-Edu tokens at context 2048 (13.5K steps of 524K tokens)"
LM_NAPE = needs(f"{LM} (softmax, SSMax, alpha-entmax, ASEntmax; NAPE)", LM_DATA, 420e6, 7.08e9, runs=4)
LM_BOTH = needs(
    f"{LM} under NAPE and under RoPE (4 maps x 2; ABF changes RoPE only at test)", LM_DATA, 420e6, 7.08e9, runs=8
)
LM_REASON = (
    "needs 420M-parameter language models pretrained on 7.1B DCLM-Edu tokens per attention map, and the paper's "
    "benchmark suites; attnlab trains no language model at this scale"
)
SCALES = needs(
    "a 120M-parameter 12-layer transformer (768 wide, 12 heads) with a learned logit scale per position and head",
    "5B FineWeb tokens at context 1024",
    120e6,
    5e9,
)
SCALES_REASON = (
    "needs a 120M-parameter language model trained on 5B FineWeb tokens with a free logit scale per position and "
    "head, whose learned scales are then fitted; attnlab trains no such model"
)


def _appendix(table: str, rows: str) -> str:
    return (
        f"no finding asks it: {table}'s NAPE softmax, alpha-entmax and ASEntmax rows are Table 1's, decided there; "
        f"its other rows ({rows}) have no finding, though attnlab lengthgen trains most of them (--pe rope, none, "
        "alibi, nape; ssmax_learned, assmax, topk_k16, sentmax)"
    )


CLAIMS = register(
    Claim(
        PAPER,
        "Fig. 1 (left)",
        "§1, §5.1, App. H.4",
        "Trained at 64 tokens with NAPE, ASEntmax keeps 95.3% exact match on MQMTAR at 65K tokens (1024x), where "
        "softmax falls to 3.0% and SSMax to 26.7%: the best extrapolation of the methods shown.",
        findings=(HEADLINE,),
        budget=TABLE1,
    ),
    Claim(
        PAPER,
        "Fig. 1 (right)",
        "§1, §5.1, App. H.3",
        "On Max Retrieval sparse maps extrapolate further than dense ones: ASEntmax keeps over 60% accuracy at 4096 "
        "items after training at 16, against 22.6% for softmax and 24.9% for Adaptive Temperature.",
        reason="no finding trains Max Retrieval; attnlab has the task in tokens (max_retrieval) but not Velickovic et "
        "al. 2025's MLP-encoded items, nor the Adaptive Temperature baseline",
        budget="Table 8's models (Velickovic et al. 2025's data and single-head model, whose size this paper does not "
        "state) trained at 16 items and scored to 4096: not estimated here",
    ),
    Claim(
        PAPER,
        "Fig. 2",
        "§2.2",
        "alpha-entmax(z / theta) of z = [2.0, 1.8, 1.6, 1.4, 1.2] puts exactly zero weight on more elements as the "
        "temperature falls, sooner for larger alpha, where softmax never does.",
        reason="an illustration of the map's definition on one five-element row, no result of its own",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Lemma 1",
        "§3.1, App. D.1",
        "Inserting a key b before the last key c never raises c's weight and under softmax always lowers it, while "
        "for alpha > 1 any b <= b_max = tau(x) / (alpha - 1) leaves it unchanged.",
        findings=(THEORY,),
        budget=CHECKS,
    ),
    Claim(
        PAPER,
        "Prop. 1",
        "§3.2, App. C",
        "alpha-entmax can keep every weight when keys are appended while softmax always leaks (i); softmax's weights "
        "stay within e^(+-Delta) / n, so its normalized entropy tends to 1 (ii); alpha-entmax with support O(n^beta) "
        "keeps normalized entropy at most beta < 1, log k for a fixed support k (iii).",
        findings=(THEORY,),
        budget=CHECKS,
    ),
    Claim(
        PAPER,
        "Prop. 2 (i)",
        "§3.3, App. D.2",
        "With alpha-entmax there are inputs whose last representations after L layers, with and without the last "
        "token repeated, stay at least c > 0 apart in L1 at every length, where softmax's gap tends to 0.",
        findings=(COLLAPSE,),
        budget=COLLAPSE_PROBE,
    ),
    Claim(
        PAPER,
        "Prop. 2 (ii)",
        "§3.3, App. D.3",
        "With supports of at most s keys, alpha-entmax cuts the gradient paths through L layers from O(n^L) to "
        "O(s^L), concentrating the gradient on fewer, stronger paths (over-squashing alleviated).",
        findings=(GRADIENTS, PATHS),
        budget=SQUASH_PROBE,
    ),
    Claim(
        PAPER,
        "Fig. 3",
        "§4.1, App. F.1",
        "Per-head logit scales learned per position in a 120M-parameter language model differ between heads and are "
        "fitted better by delta + beta (log n)^gamma (R^2 0.17) than by delta + beta log n (R^2 -14).",
        reason=SCALES_REASON,
        budget=SCALES,
    ),
    Claim(
        PAPER,
        "Fig. 4",
        "§4.2",
        "Under alpha-entmax (1.5), NoPE gives content-driven sparse weights, ALiBi a window with a hard cutoff and "
        "RoPE frequency-dependent patterns with periodic dead zones.",
        reason="an illustration of example weight profiles, no measured result",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Table 1",
        "§5.1, App. G, H.4-H.8",
        "With NAPE, ASEntmax keeps far more exact match than softmax past the training length on MQMTAR (99.0 / 95.3% "
        "against 80.2 / 3.0% at 256x / 1024x), Reverse (96.4% against 0% at 4x) and Sort (79.7% against 0% at 4x), "
        "while softmax solves Copy (99.9% at 4x) and alpha-entmax without scaling falls behind it there (86.0%).",
        findings=(COPY, HEADLINE, ENTMAX),
        budget=TABLE1,
    ),
    Claim(
        PAPER,
        "Table 2",
        "§5.2, App. G.3",
        "On short-context benchmarks the four 420M models perform comparably; ASEntmax has the best LAMBADA "
        "perplexity (41.6 against softmax's 52.4) and accuracy (34.3 against 30.9).",
        reason=LM_REASON,
        budget=LM_NAPE,
    ),
    Claim(
        PAPER,
        "Table 3",
        "§5.2, App. G.3",
        "Trained at 2K tokens, ASEntmax has the lowest long-context perplexity, on ArXiv still falling at 8x (10.01 at "
        "16K against softmax's 12.71) and leading on PubMed at 16K (12.90 against SSMax's 14.72).",
        reason=LM_REASON,
        budget=LM_NAPE,
    ),
    Claim(
        PAPER,
        "Table 4",
        "§5.2, App. G.3",
        "On RULER's needle retrieval ASEntmax keeps 97.4% on S-NIAH-1 at 16K (8x) against softmax's 0.8%, and leads "
        "on S-NIAH-2 at 2x and 4x (83.2% and 25.4% at 4K and 8K, against softmax's 4.8% and 0%).",
        reason=LM_REASON,
        budget=LM_NAPE,
    ),
    Claim(
        PAPER,
        "Fig. 5",
        "App. A",
        "For z = [0, z1, z2], alpha-entmax's p_0 reaches exactly 0 and 1 over regions that grow with alpha, unlike "
        "softmax's; top-k softmax (k = 2) is shown beside it.",
        reason="an illustration of the map's definition, no result of its own",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Lemma 2",
        "App. C",
        "With k keys at M and n - k at m, alpha-entmax gives each top key exactly 1/k at any length once M - m >= "
        "k^-(alpha-1) / (alpha - 1), while softmax needs a gap growing as ln((n - k) / k c / (1 - c)) to keep mass c.",
        findings=(THEORY,),
        budget=CHECKS,
    ),
    Claim(
        PAPER,
        "Prop. 3",
        "App. D.2",
        "With the last token repeated, alpha-entmax keeps the last outputs at least c > 0 apart in L1 at every length "
        "(0.354 for sparsemax with phi = 0.5, b = 0), where softmax's gap tends to 0 (collapse).",
        findings=(THEORY, COLLAPSE),
        budget=f"{CHECKS}; and its representational-collapse probe",
    ),
    Claim(
        PAPER,
        "Fig. 6",
        "App. D.2",
        "Through 6 layers with residual connections (identity projections, d = 1; constant and random prefixes), "
        "softmax's L1 gap between v_n and v*_{n+1} decays towards 0 as n grows to 16,384, while alpha in {1.5, 1.75, "
        "2.0} keeps a margin, larger for larger alpha (to 128K tokens in §3.3).",
        findings=(COLLAPSE,),
        budget=COLLAPSE_PROBE,
    ),
    Claim(
        PAPER,
        "Prop. 4",
        "App. D.3",
        "With alpha-entmax supports of s << n keys, the sensitivity of the last output to an input token runs through "
        "O(s^L) gradient paths instead of O(n^L), each stronger, so over-squashing is alleviated.",
        findings=(GRADIENTS, PATHS),
        budget=SQUASH_PROBE,
    ),
    Claim(
        PAPER,
        "Fig. 7 (left)",
        "App. D.3",
        "In an 8-layer transformer trained on delayed copy at n = 256, alpha-entmax keeps layer-wise gradient norms "
        "well above softmax's, most in the early layers, up to 6x higher.",
        findings=(GRADIENTS,),
        budget=SQUASH_PROBE,
    ),
    Claim(
        PAPER,
        "Fig. 7 (right)",
        "App. D.3",
        "In the same model alpha-entmax keeps few gradient paths active per layer (under 5 tokens on average in the "
        "first layer), fewer for larger alpha, while softmax keeps every path.",
        findings=(PATHS,),
        budget=SQUASH_PROBE,
    ),
    Claim(
        PAPER,
        "Prop. 5",
        "App. E.1",
        "Under NoPE, alpha-entmax deletes an edge wherever (alpha - 1) z_ij <= tau, and where the paths from the first "
        "token are cut the cumulative attention on it need not tend to 1, unlike softmax's (Wu et al. 2025).",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=UNCHECKED_PROOF,
    ),
    Claim(
        PAPER,
        "Prop. 6",
        "App. E.2",
        "Under ALiBi with slope m_h and logits in [z_min, z_max], alpha-entmax gives exactly zero weight to every key "
        "farther than d_max = ceil((z_max - z_min + 1 / (alpha - 1)) / m_h + 1).",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=UNCHECKED_PROOF,
    ),
    Claim(
        PAPER,
        "Prop. 7",
        "App. E.3",
        "Under RoPE in the small-angle regime, alpha-entmax gives exactly zero weight beyond d_max = floor(sqrt((z_max "
        "- tau / (alpha - 1)) / sum_k c_k g_k^2)).",
        reason="a proof under a second-order approximation of RoPE's cosine; no attnlab test checks it",
        budget=UNCHECKED_PROOF,
    ),
    Claim(
        PAPER,
        "Prop. 8",
        "App. E.3",
        "Under RoPE each frequency g_k crosses the alpha-entmax threshold first at d_k0 = floor(arccos(beta_k) / g_k) "
        "and again near (2 pi n +- d_k0) / g_k; d_k0 does not grow with alpha and is inversely proportional to g_k.",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=UNCHECKED_PROOF,
    ),
    Claim(
        PAPER,
        "Fig. 8",
        "App. E.4",
        "On simulated logits (n = 128, alpha 1.5) NoPE heads' attention centroids lean to early tokens, ALiBi heads' "
        "follow just below the diagonal (recency) and RoPE heads' fluctuate.",
        reason="a simulation on made-up logits (eq. 135), no trained model; no finding asks it",
        budget="none: seconds of a CPU on synthetic logits",
    ),
    Claim(
        PAPER,
        "Fig. 9",
        "App. F.1",
        "The fitted beta_h and gamma_h of every head of the 120M language model of Fig. 3 differ widely between heads.",
        reason=SCALES_REASON,
        budget=SCALES,
    ),
    Claim(
        PAPER,
        "Table 5",
        "App. G.1-G.2",
        "Each synthetic task's training rows (10M to 50M), lengths (32-64, Local Count 64-128), batch 128, vocabulary, "
        "heads, layers and widths.",
        reason="a table of settings, no result; attnlab's lengthgen --budget full takes it (TABLE5 and TABLE5_DATA in "
        "attnlab.studies.lengthgen.config)",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Fig. 10",
        "App. G.1",
        "Examples of the MQMTAR, 2Back and Local Count rows.",
        reason="a diagram of the tasks, no result of its own",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Table 6",
        "App. H.1",
        "On 2Back every map solves the task in distribution; under NAPE all keep 100% to 4096 tokens (64x), under NoPE "
        "all fall (softmax 9.7%, ASEntmax 11.5% at 4096), and under RoPE SSMax holds best (69.0%).",
        reason="no finding trains 2Back; attnlab lengthgen --task 2back --budget full builds Table 5's model and data",
        budget=_synthetic("2back", 12 * SEEDS, _doubling(64, 4096), "12 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Fig. 11",
        "App. H.1",
        "2Back attention maps (second layer): NoPE learns a relative-position diagonal in distribution (64) that "
        "diffuses at 512; the diagonal is less distorted with alpha-entmax, and ASEntmax keeps it to 3x.",
        reason="no finding reads 2Back attention maps; they come from Table 6's models",
        budget=_synthetic("2back", 4, (64, 512), "one per map"),
    ),
    Claim(
        PAPER,
        "Table 7",
        "App. H.2",
        "On Local Count ALiBi and NAPE models keep about 100% to 4096 tokens (32x), NoPE models fall (softmax 4.6%, "
        "alpha-entmax 7.7%) and attention scaling does not help NoPE.",
        reason="no finding trains Local Count; attnlab lengthgen --task local_count --budget full builds Table 5's "
        "model and data",
        budget=_synthetic("local_count", 14 * SEEDS, _doubling(128, 4096), "14 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Fig. 12",
        "App. H.2",
        "In an alpha-entmax NoPE model on Local Count, layer 3 attends locally, its weights fading with relative "
        "distance: NoPE acquires a content-based recency bias.",
        reason="no finding reads Local Count attention maps",
        budget=_synthetic("local_count", 1, (128,), "the one model shown"),
    ),
    Claim(
        PAPER,
        "Table 8",
        "App. H.3",
        "On Max Retrieval (trained at 16 items) larger alpha helps up to 16 (53.4% at 4096 against softmax's 22.6%), "
        "and ASEntmax with alpha 1.5, learned beta and gamma = 3 does best (62.7%).",
        reason="no finding trains Max Retrieval; attnlab's max_retrieval is the task in tokens, not Velickovic et al. "
        "2025's MLP-encoded items, and attnlab has no Adaptive Temperature baseline",
        budget="Velickovic et al. 2025's single-head models (size not stated in this paper), 18 rows, trained at 16 "
        "items and scored to 4096: not estimated here",
    ),
    Claim(
        PAPER,
        "Table 9",
        "App. H.4",
        "On MQMTAR RoPE and NoPE models collapse by 4x, ALiBi degrades past 64x, NAPE helps every map, and only "
        "ASEntmax keeps 95.3% at 65K (1024x), ahead of SSMax (26.7%), ASSMax (21.7%) and stick-breaking (0%).",
        reason=_appendix("Table 9", "RoPE, NoPE and ALiBi; SSMax, ASSMax, top-K 16 and 32, stick-breaking"),
        budget=_synthetic("mqmtar", 18 * SEEDS, _doubling(64, 65536), "18 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 10",
        "App. H.5",
        "On Copy softmax with NAPE generalizes to 64x (85.5%) and SSMax best (95.8%); alpha-entmax without scaling "
        "drops out of distribution (86.0% at 4x) and ASEntmax recovers softmax's level (86.6% at 64x).",
        reason=_appendix("Table 10", "RoPE, NoPE and ALiBi; SSMax, ASSMax, SEntmax, top-K 16 and 32, stick-breaking"),
        budget=_synthetic("copy", 20 * SEEDS, _doubling(64, 4096), "20 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Fig. 13",
        "App. F.1, H.5",
        "ASEntmax trained on Copy learns a negative gamma in every head and layer, spreading its attention.",
        reason="no finding reads the learned gamma; the demo's ASEntmax Copy models (2 layers x 8 heads x 64) carry "
        "it, so reading gamma = s tanh(X w_gamma) on their rows would ask it on a CPU, at the demo's scale",
        budget=_synthetic("copy", 1, (64,), "the one model shown"),
    ),
    Claim(
        PAPER,
        "Table 11",
        "App. G.2, H.6",
        "On sparse Flip-Flop, Llama 3 RoPE scaling by 16 extrapolates best for softmax (97.3% at 4x); factors 8 and "
        "32 do worse, and no factor holds at 8x.",
        reason="no finding trains Flip-Flop; attnlab lengthgen --task flipflop_sparse --pe rope --rope-scaling F "
        "builds the model",
        budget=_synthetic("flipflop", 5 * SEEDS, _doubling(64, 4096), "5 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 12",
        "App. H.6",
        "On sparse Flip-Flop ALiBi and NAPE models keep about 99.5% to 32K tokens (512x) under every map, while RoPE "
        "models fall to chance (about 50%) or below by 1024 tokens (16x).",
        reason="no finding trains Flip-Flop; attnlab lengthgen --task flipflop_sparse --budget full builds Table 5's "
        "model and data",
        budget=_synthetic("flipflop", 10 * SEEDS, _doubling(64, 32768), "10 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 13",
        "App. H.6",
        "On dense Flip-Flop every NAPE model keeps 100% to 4096 tokens (64x), while RoPE models fall to about 50% "
        "(ASEntmax holds to 4x).",
        reason="no finding trains Flip-Flop; attnlab lengthgen --task flipflop_dense --budget full builds Table 5's "
        "model and data",
        budget=_synthetic("flipflop", 8 * SEEDS, _doubling(64, 4096), "8 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 14",
        "App. H.7",
        "On Reverse ASEntmax with NAPE reaches 8x (56.7% at 512, 96.4% at 4x), RoPE models fail at 1.5x, and NAPE "
        "takes softmax and SSMax only to 1.5x, ASSMax to 2x.",
        reason=_appendix(
            "Table 14", "RoPE, NoPE and ALiBi; SSMax, ASSMax, SEntmax, top-K 16, 32 and n/2, stick-breaking"
        ),
        budget=_synthetic("reverse", 21 * SEEDS, (64, 96, 128, 256, 512), "21 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 15",
        "App. H.8",
        "On Sort two-layer alpha-entmax models generalize almost perfectly to 2x under NoPE and NAPE (99.9%, 99.3%), "
        "softmax with NAPE fails at 2x where with NoPE it keeps 97.6%, and ASEntmax with NAPE is best at 4x (79.7%).",
        reason=_appendix("Table 15", "RoPE, NoPE and ALiBi; SSMax, ASSMax, SEntmax, top-K 16 and 32, stick-breaking"),
        budget=_synthetic("sort", 19 * SEEDS, (64, 128, 256, 512), "19 rows x 3 seeds"),
    ),
    Claim(
        PAPER,
        "Table 16",
        "App. H.9",
        "On short-context benchmarks NAPE beats RoPE for every map (softmax LAMBADA perplexity 52.3 against 59.7), "
        "and RoPE with an adjusted base frequency (ABF) degrades in-distribution results (126.3).",
        reason=LM_REASON,
        budget=LM_BOTH,
    ),
    Claim(
        PAPER,
        "Table 17",
        "App. H.9",
        "On RULER, RoPE models fail past 2x, RoPE with ABF lets SSMax, alpha-entmax and ASEntmax hold S-NIAH-1 to 8x "
        "but softmax and SSMax fail S-NIAH-2, and NAPE with the scaled maps is the most consistent.",
        reason=LM_REASON,
        budget=LM_BOTH,
    ),
)
