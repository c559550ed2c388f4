"""The claims table of Zhu et al. 2026 (Learning Less Is More: Premature Upper-Layer Attention Specialization Hurts
Language Model Pretraining): every numbered result the paper reports (Theorems 1-3, Corollaries 1-4, Tables 1-12 and
Figures 1-3, main text and appendices) as one ``Claim``, saying which ``specialization`` finding decides it and at
which budget, or why no attnlab run decides it and what would. The findings run paired control / intervention
decoders at the demo's byte-level scale on a CPU; the same findings at the paper's 270M scale are
``--budget full`` on a GPU, whose cost is estimated here by ``gpu_hours``' 6 N T rule, as is that of the controls,
sweeps and replications no finding reads yet. The theorems are proofs, which no attnlab test checks yet.
"""

from __future__ import annotations

from attnlab.studies.claims import UTILIZATION, Claim, gpu_hours, needs, register

PAPER = "Zhu et al. 2026"

EARLY = "specialization: early dependence on upper Q/K"
GAIN = "specialization: the intervention lowers GELU's perplexity"
SHRINK = "specialization: a gated FFN shrinks the gain"
RELIANCE = "specialization: less reliance on upper Q/K at the end"
ROUTING = "specialization: lower-copy routing on time"
SLOWS = "specialization: the intervention slows upper Q/K"
WRITE = "specialization: gated FFNs cut the upper residual write"

# What the recorded run trained (attnlab.studies.specialization.plan BUDGETS["demo"])
DEMO = (
    "demo: attnlab demo on 2 CPU cores (attnlab study specialization --budget demo: byte-level decoders of 4 layers "
    "x 4 heads x 64, context 128, 600 steps of 16 rows of the standard library's .py files, 5 GELU and 2 SwiGLU "
    "control / intervention pairs, evaluations every 3% of training)"
)
# §4 and App. J: the 270M decoder, 2.5B FineWeb-Edu tokens in batches of 524,288, on 8 H100s per run
MODEL = "the 270M GPT-style decoder (20 layers x 960, 15 heads, context 1024)"
DATA = "2.5B GPT-2-tokenized FineWeb-Edu tokens"
FULL = (
    "attnlab study specialization --budget full --data SHARDS on a GPU (App. J's shape and data, 5 seeds per "
    "architecture)"
)


def _full(what: str, runs: int) -> str:
    """The demo, then the paper-scale run of the same finding: ``what`` the full budget trains for it."""
    return f"{DEMO}; at the paper's scale, {FULL}: {what}, {needs(MODEL, DATA, 270e6, 2.5e9, runs=runs)}"


def _pretraining(runs: int, what: str) -> str:
    return f"{what}: {needs(MODEL, DATA, 270e6, 2.5e9, runs=runs)}"


PROOF = "none: a proof (no attnlab test checks it yet)"
NOTHING = "none: nothing to decide"
ARCHITECTURES = (
    "one control / intervention pair per architecture (GPT-style, +RMSNorm, +biasless, +matched SwiGLU, LLaMA-style "
    "+LayerNorm, LLaMA-style)"
)
UNREAD = "attnlab's full budget trains this arm beside the GELU pairs (5 seeds), but no finding reads it"
# App. C: the GELU-3840, GELU-2560, SwiGLU-2560 and GEGLU-2560 decoders trained to 20% of the token budget
WRITE_RUNS = needs(
    f"{MODEL} with GELU-3840, GELU-2560, SwiGLU-2560 and GEGLU-2560 FFNs, to 20% of training (App. C)",
    "0.5B FineWeb-Edu tokens",
    270e6,
    0.5e9,
    runs=4,
)
# App. I: the 3% checkpoint (75M of the 2.5B tokens) of a control and an intervention run
LOCALITY = (
    f"the 3% checkpoints of a control and an intervention run of {MODEL} (75M tokens each of the 2.5B schedule): "
    f"about {2 * gpu_hours(270e6, 75e6):.1f} H100-hours (6 N T FLOPs at {UTILIZATION:.0%} of an H100's bf16 peak, "
    "an estimate), plus a way to build the projector P"
)

CLAIMS = register(
    Claim(
        PAPER,
        "Fig. 1",
        "§1",
        "One upper-Q/K logit-growth pathway drives premature upper attention specialization: single-branch FFNs feed "
        "its immature residual energy and full-speed early upper-Q/K learning its step size; slowing upper Q/K and "
        "gated FFNs cut it from the two sides.",
        reason="a diagram of the mechanism, no result of its own",
        budget=NOTHING,
    ),
    Claim(
        PAPER,
        "Fig. 2 (left)",
        "§4, §5.5",
        "The intervention's perplexity gain is large in GPT-style (GELU) blocks and small in gated-FFN blocks.",
        findings=(SHRINK,),
        budget=_full("the GELU, SwiGLU and GEGLU pairs", 30),
    ),
    Claim(
        PAPER,
        "Fig. 2 (right)",
        "§4, §5.5",
        "Across architectures, the higher the early (3%) upper attention entropy, the less the intervention gains.",
        reason="no finding relates early upper entropy to the gain across architectures; attnlab's full budget trains "
        "pairs of six architectures (GELU, SwiGLU, GEGLU, +RMSNorm, biasless, LLaMA-style) and records the entropy, "
        "but nothing reads the relation",
        budget=_pretraining(12, ARCHITECTURES),
    ),
    Claim(
        PAPER,
        "Table 1",
        "§4, §5.1",
        "In the 270M GPT-style decoder (3 seeds, 2.5B tokens), slowing early upper-half Q/K by x0.25 lowers the final "
        "loss by 0.0187 +- 0.0030 and perplexity by 0.4967 +- 0.0789 (26.80 to 26.30), reaching the control's final "
        "loss after 2.171B tokens (13.17 +- 1.41% of tokens saved).",
        findings=(GAIN,),
        budget=_full("the GELU pairs", 10),
    ),
    Claim(
        PAPER,
        "Table 2",
        "§5.2",
        "On a seven-task downstream suite the intervention raises the mean score by 0.41 +- 0.14 points over 3 seeds "
        "and wins 14 of 21 run-task comparisons, most on LAMBADA (+1.0), RACE (+0.8) and ARC-Easy (+0.6).",
        reason="needs the 270M models of Table 1 and the downstream suite (PIQA, HellaSwag, ARC-Easy, ARC-Challenge, "
        "RACE, LAMBADA, MMLU), which attnlab does not run",
        budget=_pretraining(6, "Table 1's three control / intervention pairs, then the seven-task suite"),
    ),
    Claim(
        PAPER,
        "Table 3",
        "§5.5",
        "One matched comparison per architecture: the gain is 0.5858 ppl for GPT-style, 0.5179 with RMSNorm, 0.3928 "
        "without biases, 0.1075 with a matched SwiGLU FFN, 0.2253 for LLaMA-style with LayerNorm and 0.0182 for "
        "LLaMA-style; the SwiGLU FFN lowers the 3% upper logit (1.044 against 1.308) and raises upper entropy (0.708 "
        "against 0.621).",
        reason="its SwiGLU row is Table 4's, decided there; the RMSNorm, biasless and LLaMA-style rows have no "
        "finding: attnlab's full budget trains gelu_rmsnorm, gelu_biasless and llama pairs (not LLaMA-style with "
        "LayerNorm), but nothing reads them",
        budget=_pretraining(12, ARCHITECTURES),
    ),
    Claim(
        PAPER,
        "Fig. 3A",
        "§5.4",
        "Lower-layer copy routing matures at the same point, 3% of training, under control and intervention; only "
        "the upper sharp-entropy crossing moves (from 3% to 20%).",
        findings=(ROUTING,),
        budget=_full("the GELU pairs", 10),
    ),
    Claim(
        PAPER,
        "Fig. 3B-C",
        "§5.3-5.4",
        "Under the intervention upper attention entropy stays high longer and upper-Q/K logit growth is suppressed, "
        "with a smaller top singular value of the upper W_Q^T W_K at 3%.",
        findings=(SLOWS,),
        budget=_full("the GELU pairs", 10),
    ),
    Claim(
        PAPER,
        "Fig. 3D",
        "§5.3",
        "Zeroing upper-half Q/K raises the control's perplexity by 82.3 at 3% of training and 146.1 at the end, the "
        "intervention's by 0.35 and 17.4: the control becomes prematurely and lastingly dependent on upper Q/K.",
        findings=(EARLY, RELIANCE),
        budget=_full("the GELU pairs", 10),
    ),
    Claim(
        PAPER,
        "Table 4",
        "§5.6",
        "With matched gated width and parameter count, SwiGLU and GEGLU cut the intervention's gain from GELU's "
        "0.5858 ppl to 0.1075 and 0.0549, their 3% upper entropy higher (0.708 and 0.729 against 0.621).",
        findings=(SHRINK,),
        budget=_full("the GELU, SwiGLU and GEGLU pairs", 30),
    ),
    Claim(
        PAPER,
        "Table 5",
        "§5.6, App. C",
        "At 3% of training matched SwiGLU and GEGLU FFNs cut the upper-layer FFN residual-write RMS by 55.0% and "
        "52.4% against GELU-3840 (0.0542 and 0.0573 against 0.1205) and by 42.2% and 38.9% against a width-matched "
        "GELU-2560 (0.0938), with lower upper logit and higher upper entropy.",
        findings=(WRITE,),
        budget=f"{DEMO}; at the paper's scale, {WRITE_RUNS}; attnlab's full budget has no GELU-2560 control",
    ),
    Claim(
        PAPER,
        "Theorem 1",
        "§6, App. B.1",
        "One gradient step on upper W_Q, W_K moves the immature logit block Z_P by at most ||X_P||_op^2 ||X_P||_F "
        "||E||_op / d_k (eta_Q ||X W_K W_K^T P||_F + eta_K ||X W_Q W_Q^T P||_F) + O(eta_Q eta_K), and by O(eta_upper "
        "||X_P||_F^4 / d_k) under the immature-channel locality condition.",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Cor. 1",
        "App. B.1",
        "Without further assumptions the immature-logit growth is bounded by ||E||_op ||X||_F / d_k (eta_Q "
        "||W_K||_op^2 + eta_K ||W_Q||_op^2) ||X_P||_op^2 ||X_P||_F, cubic in the immature residual amplitude.",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Cor. 2",
        "App. B.1",
        "Under the locality condition ||X W_S W_S^T P||_F <= lambda_S ||X_P||_F ||W_S||_op^2 the growth is "
        "O(eta_upper ||X_P||_F^4 / d_k).",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Cor. 3",
        "App. B.1",
        "An early upper-Q/K multiplier alpha scales the first-order immature-logit growth by alpha (Delta Z_P(alpha) "
        "= alpha Delta Z_P(1) + O(eta^2)), fourfold less at alpha = 0.25.",
        reason="a proof: the statement is mathematical; the check 'the intervention slows upper Q/K' sees its "
        "consequence (lower upper logits before release) but not the factor alpha, and no test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Theorem 2",
        "§6, App. B.2",
        "At initialization a gated FFN's output energy in any residual subspace is rho_0 = (tau_g^2 / tau_s^2) (r / m) "
        "nu E psi(G)^2 / E phi(G)^2 times a single-branch FFN's: about 0.256 for GEGLU and 0.216 for SwiGLU at the "
        "matched widths m = 3840, r = 2560 (nu about 0.384).",
        reason="a proof at initialization; tests/model/test_ffn.py::"
        "test_matched_gated_ffn_writes_theorem_2s_share_of_the_gelu_write_at_initialization checks it as a property "
        "of attnlab's FFNs (rho_0 by quadrature: 0.256 GEGLU, 0.216 SwiGLU at the paper's widths; the modules' "
        "Monte Carlo write ratio within 3% of it)",
        budget="none: a proof (checked as a property in the test suite, seconds on a CPU)",
    ),
    Claim(
        PAPER,
        "Cor. 4",
        "App. B.2",
        "Added residually, a gated FFN leaves the immature residual energy a factor rho_bar < 1 of a single-branch "
        "FFN's whenever the latter adds energy there.",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Theorem 3",
        "§6, App. B.3",
        "If a gated FFN cuts the immature residual energy by rho_bar, it cuts the upper-Q/K immature-logit growth by "
        "rho_bar^2 at comparable step size: the two levers act on one term, eta_upper ||X_P||_F^4.",
        reason="a proof: the statement is mathematical; no attnlab test checks it",
        budget=PROOF,
    ),
    Claim(
        PAPER,
        "Table 6",
        "§5.6, App. D",
        "An upper-attention entropy floor (lambda 0.10, h0 0.80) raises the 3% upper entropy to 0.799 and lowers the "
        "upper logit to 0.861, but gains only 0.061 ppl against the selective slowing's 0.586.",
        reason=f"no finding reads the entropy-floor control: {UNREAD} (entropy_floor)",
        budget=_pretraining(3, "a control, the entropy-floor control and the intervention"),
    ),
    Claim(
        PAPER,
        "Table 7",
        "§5.1, App. E",
        "Halving the global learning rate worsens the final perplexity by 4.569 (26.849 to 31.418), where selective "
        "upper-Q/K slowing improves it by 0.436: the gain is not generic slower training.",
        reason=f"no finding reads the global learning-rate control: {UNREAD} (global_lr_half)",
        budget=_pretraining(3, "a control, the global x0.5 learning-rate control and the intervention"),
    ),
    Claim(
        PAPER,
        "Table 8",
        "§2, App. F",
        "Replayed on the logged lower-copy scores, the main release rule (threshold 0.005, patience 3, window 3-12%) "
        "releases at 4.01% of training and nearby variants between 3.00% and 5.49%.",
        reason="an offline replay of the intervention runs' logged lower-copy scores under nearby rules; attnlab logs "
        "the same readings every 0.5% of training in every arm and dates each release, but no finding replays rule "
        "variants",
        budget=_pretraining(
            3, "the logged lower-copy readings of Table 1's three intervention runs (the replay trains nothing)"
        ),
    ),
    Claim(
        PAPER,
        "Table 9",
        "§5.1, App. F",
        "Releasing at a fixed 3% or 6% of training keeps most of the gain (0.5108 and 0.4680 ppl, 13.92% and 13.07% "
        "of tokens saved) against the adaptive rule's 0.5858 and 14.80%.",
        reason=f"no finding reads the fixed-release controls: {UNREAD} (fixed_3, fixed_6)",
        budget=_pretraining(4, "a control, the adaptive intervention and the releases fixed at 3% and 6%"),
    ),
    Claim(
        PAPER,
        "Table 10",
        "§5.4, App. G",
        "Over multipliers 1.0, 0.5, 0.25 and 0.125 the 3% upper entropy rises (0.627 to 0.984) and the upper logit "
        "(1.302 to 0.342) and W_Q^T W_K displacement (3.272 to 0.333) fall monotonically; final perplexity improves "
        "for every reduced multiplier and saturates (26.218 at 0.25, 26.226 at 0.125, 26.712 for the control).",
        reason=f"no finding reads the multiplier sweep: {UNREAD} (intervention_m0.5, intervention_m0.125)",
        budget=_pretraining(4, "the control and the multipliers 0.5, 0.25 and 0.125"),
    ),
    Claim(
        PAPER,
        "Table 11",
        "§5.1, App. H",
        "A 0.7B GPT-style decoder trained on 7.0B tokens (3 seeds) gains 0.1274 +- 0.0073 ppl (18.23 to 18.10) and "
        "reaches the control's final loss 0.539B tokens sooner.",
        reason="needs 0.7B-parameter language models pretrained on 7.0B FineWeb-Edu tokens; attnlab's largest budget "
        "is the 270M decoder",
        budget=needs(
            "a 0.7B GPT-style decoder (22 layers x 1536, 12 heads, FFN 6144, context 1024)",
            "7.0B FineWeb-Edu tokens",
            700e6,
            7e9,
            runs=6,
        ),
    ),
    Claim(
        PAPER,
        "Table 12",
        "§6, App. I",
        "At the 3% checkpoint the locality ratios stay below one (lambda_Q 0.63 and 0.49, lambda_K 0.58 and 0.46 for "
        "control and intervention) and the immature energy share R_P / ||X||_F^2 is 0.18 and 0.16.",
        reason="attnlab does not measure lambda_Q, lambda_K or R_P: the paper does not say how it builds the projector "
        "P onto immature residual directions from a checkpoint",
        budget=LOCALITY,
    ),
)
