"""Every numbered result of Hayase & Karakida 2026 ("A Unified Framework for Critical Scaling of Inverse
Temperature in Self-Attention") and what attnlab does with it. The paper defines a score row's gap count N_n(t),
its upper-tail accumulation scale Lambda_n and contact point (alpha_n, Delta_n), proves that Lambda_n is the
critical inverse temperature (Theorem 4.6) and that xi_Lambda = xi_alpha - xi_Delta + 1 (Cor. 4.9), and reads
xi_hat_Lambda off Qwen-7B-Chat past its window and off GPT-124M trained with a learnable beta_n (Table 2). Each
theorem, proposition, corollary, lemma, example, table and figure is one ``Claim`` below, in the paper's order: the
temperature study's findings (and the card's) decide Table 2's readings on a small decoder trained with the same
beta_n and on pretrained checkpoints attnlab can fetch; the proofs are mathematical, and most are checked as
properties of attnlab's gap statistics in ``tests/diagnostics/test_gaps.py``; the Qwen-7B-Chat sweeps and the
GPT-124M trajectories need checkpoints or GPU training that no recorded run has.
"""

from __future__ import annotations

from attnlab.studies.claims import Claim, needs, register

PAPER = "Hayase & Karakida 2026"

# The recorded run: the demo's temperature study at its smoke budget, with SmolLM2 read past its window.
DEMO = (
    "demo: attnlab demo on 2 CPU cores (attnlab study temperature --budget smoke --model smollm2: a 2-layer x "
    "4-head x 64 RoPE decoder with eq. A.1's learnable beta_n, 1500 steps, 3 training seeds, n = 16 ... 256 and "
    "past the window to 1024; SmolLM2-135M read at n_eval = 1.25 x its 8192-token window on 4 documents)"
)
CARD = (
    "card: attnlab card MODEL on 2 CPU cores (quick and standard budgets; the recorded cards of SmolLM2-135M and "
    "Gemma-3-270M ran quick, 4 documents)"
)
TABLE2 = f"{DEMO}; {CARD}"
TESTED = "none: a proof (checked as a property in the test suite)"
PROOF = "none: a proof; nothing to run"
NOTHING = "none: nothing to decide"
GAPS = "tests/diagnostics/test_gaps.py"

# App. A.3's training runs: GPT-124M, 100k iterations of 2048 sequences x 1024 tokens (2.1e11 tokens), one run per
# (positional encoding, dataset).
GPT124M = "GPT-124M with a learnable beta_n (App. A.3)"
GPT_TOKENS = 100_000 * 2048 * 1024
QWEN = (
    "Qwen-7B-Chat, which attnlab fetch does not offer (it offers SmolLM2-135M and Gemma-3-270M) and whose bundled "
    "modeling code the paper pins to transformers 4.32 (App. A.5)"
)

CLAIMS = register(
    Claim(
        PAPER,
        "Table 1",
        "§2.2, App. E",
        "Prior inverse-temperature rules fix xi_beta in beta_n ~ (log n)^xi_beta a priori: 1/2 for Gaussian-logit "
        "analyses, 1 for SSMax, Qwen's LogN and the equicorrelated phase transition, 2 for YaRN (App. E: its "
        "multiplier acts on both query and key).",
        reason="a table of prior work's exponents, no measurement; App. E's YaRN row is algebra",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Fig. 1a-b",
        "§3, App. A.2, B.2",
        "Sweeping xi_beta in Qwen-7B-Chat's multiplier past its 8192-token window (dynamic-NTK RoPE, back-half "
        "sliding-window perplexity on PG-19 and Proof-Pile-2), xi_beta = 1 is not a local minimum: the optima lie at "
        "xi*_beta in [2, 2.5].",
        reason=f"needs {QWEN}; attnlab xi-sweep runs this protocol (m(n; xi), dynamic-NTK RoPE, back-half perplexity) "
        "on any local checkpoint, but no finding reads a pretrained model's sweep: the study's xi*_PPL is its own "
        "small decoder's (Table 2)",
        budget="Qwen-7B-Chat on PG-19 and Proof-Pile-2 (20 documents, n_eval 8192-32768) at xi_beta = 0, 0.5, ..., 3: "
        "about 25 min per (xi_beta, dataset) on one H100 (App. A.4), so about 6 H100-hours; <= 60 for the 0.1 grid",
    ),
    Claim(
        PAPER,
        "Fig. 1c-d",
        "§3, App. B.1-B.2",
        "The bias-free least-squares fit of GPT-124M's learned beta_n to a_1 (log n)^xi_beta (n >= 64) has its MSE "
        "minimum below xi_beta = 1 on SlimPajama and OpenWebText (xi*_beta in {0.40, 0.50}).",
        findings=("temperature: xi_hat_Lambda and xi_hat_beta below 1",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Theorem 4.6",
        "§4.2",
        "Lambda_n is the critical (top-two/entropy) scale: beta_n / Lambda_n -> 0 closes the top-two weight gap and "
        "beta_n / Lambda_n -> infinity collapses the entropy, for any deterministic score rows.",
        reason=f"a proof; {GAPS}::test_lambda_n_is_the_critical_scale checks it on equicorrelated and block rows "
        "with known xi_Lambda along n = 2^8 ... 2^16 (beta = 8 Lambda_n collapses the entropy, Lambda_n / 8 closes "
        "the top-two gap, Lambda_n does neither)",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Cor. 4.7",
        "§4.2, App. D",
        "Lambda_n is also the rank-entropy scale when the contact-count entropy C_n = Lambda_n Delta_n = "
        "alpha_n log n diverges.",
        reason=f"a proof (Theorem 4.6's supercritical half and Cor. D.6); {GAPS}::"
        "test_d1_boundary_check_on_random_rows checks Cor. D.6's bound, not the corollary's limit",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Fig. 2",
        "§4.3, App. C.1",
        "A score row's gap count N_n(t), its envelope N = exp(Lambda_n t) and the contact point (Delta_n, "
        "N_n(Delta_n)) where the envelope touches it.",
        reason=f"a diagram of Definitions 4.3-4.5 on one row, no result of its own; attnlab's gap statistics are "
        f"checked against enumeration of those definitions ({GAPS}::test_matches_brute_force_on_random_masked_rows)",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Cor. 4.8",
        "§4.3",
        "Under Lambda_n ~ (log n)^xi_Lambda, any schedule beta_n ~ (log n)^xi_beta that avoids both top-two and "
        "entropy collapse has xi_beta = xi_Lambda.",
        reason="a proof (from Theorem 4.6), with no test of its own; its empirical reading, a learned beta_n's "
        "exponent against xi_hat_Lambda, is Table 2's, which the temperature study decides",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Cor. 4.9",
        "§4.3, §4.5.2",
        "If two of Lambda_n, alpha_n, Delta_n have logarithmic growth exponents, so does the third, with xi_Lambda = "
        "xi_alpha - xi_Delta + 1; Table 2's bucket-mean slopes obey it row by row.",
        findings=("temperature: Cor. 4.9 identity",),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Fig. 3",
        "§4.4",
        "The two-level block-constant Gram matrix (4.8) has N_n jumping to m_n at delta_n and to n at tau_n, so "
        "Lambda_n = max(log m_n / delta_n, log n / tau_n) (4.9), read off the within-block gap when it dominates.",
        reason=f"a diagram of §4.4's construction; its arithmetic is checked in {GAPS}::test_two_level_block_rows, "
        "test_block_realization_of_a_prescribed_exponent and test_equicorrelated_rows",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Fig. 4",
        "§4.5.2, App. G.1",
        "Qwen-7B-Chat's four cells sit below the diagonal xi_hat_alpha = xi_hat_Delta (xi_hat_Lambda > 1) and "
        "nanoGPT's four above it (xi_hat_Lambda < 1), so the sign of xi_hat_alpha - xi_hat_Delta fixes the side of "
        "1; one row per side drawn as N_n(t) (Lambda_n, alpha_n, Delta_n about (4.22, 0.13, 0.33) and (1.64, "
        "0.26, 1.09)).",
        findings=(
            "temperature: xi_hat_Lambda and xi_hat_beta below 1",
            "temperature: xi_hat_Lambda above 1 on a pretrained checkpoint",
            "temperature: Cor. 4.9 identity",
        ),
        budget=DEMO,
    ),
    Claim(
        PAPER,
        "Table 2",
        "§4.5.2, App. F, G",
        "xi_hat_Lambda, read off attention scores alone, lands on the side of 1 of the sweep optimum xi*_beta in "
        "every cell: 1.74-2.33 against 2.0-2.5 on Qwen-7B-Chat past its window, 0.52-0.69 against xi_hat_beta "
        "0.35-0.46 (|difference| 0.12-0.27) on GPT-124M, with xi_hat_Lambda = xi_hat_alpha - xi_hat_Delta + 1 row "
        "by row.",
        findings=(
            "temperature: xi_hat_Lambda and xi_hat_beta below 1",
            "temperature: xi_hat_Lambda agrees with xi_hat_beta",
            "temperature: xi_hat_Lambda past the window on xi*_PPL's side of 1",
            "temperature: Cor. 4.9 identity",
            "temperature: xi_hat_Lambda above 1 on a pretrained checkpoint",
            "card temperature",
        ),
        budget=TABLE2,
    ),
    Claim(
        PAPER,
        "Table 3",
        "App. A.3, A.5",
        "The configuration of the four GPT-124M runs (12 layers x 12 heads x 768, learnable beta_n with per-head "
        "s beta_n + b, AdamW 6e-4 to 6e-5, 100k iterations of 2048 x 1024 tokens; learned or RoPE positions x "
        "SlimPajama or OpenWebText).",
        reason="a configuration table, no result of its own; attnlab study temperature --budget full is this "
        "configuration",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Table 4",
        "App. B.1",
        "xi_hat_beta rises with the fit's trim threshold (SlimPajama 0.305 at n >= 10 to 0.477 at n >= 200; "
        "OpenWebText 0.375 to 0.618), with n >= 64 on a plateau within +-0.04 of n >= 51.",
        reason="needs the paper's two learned-position GPT-124M runs at iteration 100k; the temperature study fits "
        "xi_hat_beta at one trim on its own small decoder, and no finding reads the trim",
        budget=needs(GPT124M, "SlimPajama and OpenWebText", 124e6, GPT_TOKENS, runs=2),
    ),
    Claim(
        PAPER,
        "Fig. 5",
        "App. B.1",
        "The MSE landscape of the beta_n fit on all four GPT-124M runs at 10k, 50k and 100k iterations: learned-PE "
        "and RoPE runs settle at distinct exponents within each dataset, the minima below xi_beta = 1.",
        reason="needs the paper's four GPT-124M runs (2 positional encodings x 2 datasets) with their checkpoints; "
        "attnlab trains one small RoPE decoder per seed, and no finding compares positional encodings",
        budget=needs(GPT124M, "SlimPajama and OpenWebText", 124e6, GPT_TOKENS, runs=4),
    ),
    Claim(
        PAPER,
        "Lemma C.1",
        "App. C.1",
        "With no tie at the maximum, Lambda_n = sup_t log N_n(t) / t is a maximum over the positive competitor "
        "gaps; with a tie, Lambda_n = infinity.",
        reason=f"a proof; attnlab computes Lambda_n by this maximum, checked against enumeration in {GAPS}::"
        "test_matches_brute_force_on_random_masked_rows and test_matches_brute_force_on_few_level_rows",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Cor. C.2",
        "App. C.2",
        "With n_max >= 2 tokens tied at the maximum, Lambda_n = infinity, max_j p_n,j(beta) <= 1 / n_max and "
        "H_n(beta) >= log n_max for every beta, so no finite TE scale exists if ties recur.",
        reason=f"a proof; {GAPS}::test_ties_at_the_maximum checks Lambda_n = infinity and p*_n <= 1 / N_n(0)",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Fig. 6",
        "App. C.1",
        "N_n(t) with its envelope and contact point, and the same data as the sorted competitor gaps against log j "
        "(t = log j / Lambda_n), related by the axis swap j <-> N.",
        reason="a diagram (Fig. 2 and its sorted-rank rendering), no result of its own",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Prop. C.4",
        "App. C.3",
        "Every positive semidefinite score matrix of rank <= d_qk is realized by self-attention with Q_n = K_n, so "
        "every Gram row is a fixed-query attention score row.",
        reason="a proof (a Gram factorization); the tests build §4.4's Gram rows directly and no test checks the "
        "Q = K factorization",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Prop. D.1",
        "App. D",
        "Coordinate-wise rank collapse, max_(i,j) |p_n,i - p_n,j| -> 0, holds iff the rank free energy log Z_n(beta_n) "
        "-> infinity, since max_j p_n,j = 1 / Z_n.",
        reason=f"a proof; p*_n = 1 / Z_n is checked against softmax's largest weight in {GAPS}::"
        "test_d1_boundary_check_on_random_rows",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Prop. D.4",
        "App. D",
        "If beta_n < Lambda_n^(r_n) eventually for a resolution r_n -> infinity, rank-gap collapse holds.",
        reason="a proof; attnlab computes the resolved scale Lambda_n^(r) (checked against enumeration in "
        f"{GAPS}), but no test checks the implication",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Lemma D.5",
        "App. D",
        "The Laplace envelope S_n(beta) = sup_t (log N_n(t) - beta t) sandwiches the free energy: S_n(beta) <= "
        "log Z_n(beta) <= S_n(beta) + log(1 + log n).",
        reason=f"a proof; {GAPS}::test_d1_boundary_check_on_random_rows checks its consequence p*_n >= 1 / "
        "(1 + log n) at beta >= Lambda_n",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Cor. D.6",
        "App. D",
        "If beta_n / Lambda_n -> 0 and the contact-count entropy C_n = log N_n(Delta_n) diverges, rank collapse holds.",
        reason=f"a proof; {GAPS}::test_d1_boundary_check_on_random_rows checks its bound p*_n <= "
        "exp(-(C_n - beta Delta_n)) on random rows",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Example D.7",
        "App. D",
        "Scores 0, -log 2 / log n and -log n (n - 2 times) give Lambda_n = log n, Delta_n = log 2 / log n and "
        "C_n = log 2; at beta_n = sqrt(log n) the row tends to (1/2, 1/2, 0, ...): top-two collapse without rank "
        "collapse, so Cor. 4.7 needs C_n -> infinity.",
        reason=f"a worked example; {GAPS}::test_example_d7_bounded_contact_count checks it at n = 64, 4096, 2^16",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Example D.8",
        "App. D",
        "For Example D.7's row the resolved scale Lambda_n^(r_n) = (log n - r_n) / log n ~ 1 at any r_n -> "
        "infinity with r_n = o(log n), against Lambda_n = log n; at beta_n = sqrt(log n), Z_n -> 2.",
        reason=f"a worked example; {GAPS}::test_example_d7_bounded_contact_count checks Lambda_n^(r) = "
        "(log n - r) / log n",
        budget=TESTED,
    ),
    Claim(
        PAPER,
        "Table 5",
        "App. D.1",
        "On 45,467 Qwen-7B-Chat rows (xi_0 = 2) the median p*_n(gamma Lambda_n) is 0.15-0.20 at gamma = 0.5, "
        "0.40-0.45 at 1 and 0.62-0.64 at 1.5, and 89-93% of rows have p*_n <= 1 / log n at gamma = 0.1: Lambda_n "
        "separates the diffuse and concentrated regimes.",
        reason=f"needs {QWEN}; attnlab's row statistics compute p*_n(gamma Lambda_n) (row_stats' gamma columns, "
        "checked in the tests), but no command or finding reads them on a model",
        budget="Qwen-7B-Chat rows at n_eval 16384 and 32768 on 9 documents: about 2 min per (xi_0, dataset, "
        "n_eval, document) capture on one H100, about 10 H100-hours with the xi_0 sweep (App. A.4)",
    ),
)
