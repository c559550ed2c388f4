"""Commands on a checkpoint: ``audit``, ``lengths``, ``substitute``, ``ablate``, ``heads``, ``temperature``,
``xi-sweep``, ``matched``; ``diagnose`` and ``fit-xi`` on saved score tensors."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path

from attnlab.cli.base import PROGRESS_HELP, command, print_table
from attnlab.options import option

OVERWRITE_HELP = "replace what --out holds even when it is another run's or not attnlab's"


def output(command_name: str) -> type:
    """The ``--out DIR`` (default runs/<command>), ``--overwrite`` and ``--no-progress`` options of a
    checkpoint command."""
    return dataclasses.make_dataclass(
        f"{command_name.title().replace('-', '')}Output",
        [
            ("out", Path, option(Path("runs") / command_name, "output folder", metavar="DIR")),
            ("overwrite", bool, option(False, OVERWRITE_HELP)),
            ("no_progress", bool, option(False, PROGRESS_HELP)),
        ],
        frozen=True,
    )


def _report(result: dict, what: str) -> int:
    b_auto = result["b_auto"]
    print(f"{what}{'' if b_auto is None else f'; b_auto = {b_auto:.6g}'}")
    print_table(result["table"])
    if result.get("summary"):
        print(result["summary"])
    print("wrote:")
    for path in result["paths"].values():
        print(f"  {path}")
    return 0


def _checkpoint_command(
    name: str, help: str, description: str, config: str
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Declare checkpoint command ``name`` on ``attnlab.analyses.<name>`` (a hyphen in the name is an underscore
    in the module's), whose ``run(cfg, out, overwrite=...)`` makes the result; the decorated function says in
    one line what the printed table is."""
    module = f"attnlab.analyses.{name.replace('-', '_')}"

    def add(what: Callable[..., str]) -> Callable[..., str]:
        @command(name, help, description, f"{module}:{config}", output(name))
        def handler(cfg, out) -> int:
            from attnlab.io import locked

            run = importlib.import_module(module).run
            with locked(out.out):  # from the command's output check through its write: a second run is refused at once
                result = run(cfg, out.out, overwrite=out.overwrite, progress=not out.no_progress)
            return _report(result, what(cfg))

        return what

    return add


@_checkpoint_command(
    "audit",
    "prevalence of the polynomial-unsafe regime in a checkpoint (Polynomial Concentration)",
    "One forward per prompt with an observer at every attention site: per-row S_p, margins, status and gap "
    "counting streamed to Parquet, and the prevalence table of Polynomial Concentration Table 1/10/11 per bias b.",
    "AuditConfig",
)
def audit(cfg) -> str:
    return (
        f"audit of {cfg.model} on {cfg.suite} ({cfg.prompts} prompts, queries {cfg.queries}, "
        f"target {cfg.target}); unsafe = S_p >= 1 over active rows, with 95% intervals over prompts"
    )


@_checkpoint_command(
    "lengths",
    "unsafe-row rate against context length (Polynomial Concentration App. C)",
    "The audit at every prompt length of --lengths, with one model load and one b_auto for the sweep: per "
    "length, b and p the unsafe % of the active rows with its 95% interval over prompts and the medians of rho and "
    "A_act "
    "(Polynomial Concentration App. C, Fig. 5).",
    "LengthsConfig",
)
def lengths(cfg) -> str:
    return (
        f"length sweep of {cfg.model} on {cfg.suite} ({cfg.prompts} prompts per length, queries {cfg.queries}, "
        f"target {cfg.target}); unsafe = S_p >= 1 over active rows, with 95% intervals over prompts"
    )


@_checkpoint_command(
    "substitute",
    "zero-shot substitution sweep: accuracy per recipe (Polynomial Concentration)",
    "Replace softmax on every head by each recipe in turn and score the suite by exact match of the greedy "
    "continuation (Polynomial Concentration Table 3).",
    "SubstituteConfig",
)
def substitute(cfg) -> str:
    return (
        f"substitution on {cfg.model}, suite {cfg.suite} ({cfg.prompts} prompts); accuracy with Wilson 95% "
        "interval, delta from softmax in percentage points"
    )


@_checkpoint_command(
    "ablate",
    "group head ablation: top/bottom/random-K heads by S_p (Polynomial Concentration)",
    "Rank heads by their median S_p in one diagnostic pass, polynomialize the top-K, bottom-K and random-K "
    "heads with a recipe, and score the suite (Polynomial Concentration §5.4); decisive = top-K strictly worse "
    "than every random draw.",
    "AblateConfig",
)
def ablate(cfg) -> str:
    return (
        f"group ablation on {cfg.model}: heads ranked by median {cfg.rank_by} on {cfg.rank_suite}, "
        f"top/bottom/random K polynomialized with {cfg.recipe}, scored on {cfg.suite} ({cfg.prompts} "
        "prompts); delta from softmax in pp, decisive = top below every random draw"
    )


@_checkpoint_command(
    "heads",
    "sink / induction / local / diffuse type of every head (Polynomial Concentration App. H)",
    "One forward per induction prompt; per head the mean weight at the planted B, row entropy, "
    "query-to-argmax distance and sink weight, and its type.",
    "HeadsConfig",
)
def heads(cfg) -> str:
    return (
        f"head types of {cfg.model} over {cfg.prompts} induction prompts at L = {cfg.length} "
        "(Polynomial Concentration App. H); per head in heads.csv"
    )


@_checkpoint_command(
    "temperature",
    "contact triples per context length and xi_hat_Lambda (Hayase & Karakida 2026)",
    "One forward per document; per layer, head and n the row of the query that sees n keys, its contact "
    "triple (Lambda_n, alpha_n, Delta_n), and the exponents xi_hat with bootstrap half-IQRs over (layer, "
    "head) (Hayase & Karakida 2026 §4.5).",
    "TemperatureConfig",
)
def temperature(cfg) -> str:
    return (
        f"contact triples of {cfg.model} at n = {' '.join(map(str, cfg.n))} ({cfg.docs} documents, "
        f"{cfg.suite}; Hayase & Karakida 2026 §4.5): bucket means of log X over non-tied rows"
    )


@_checkpoint_command(
    "xi-sweep",
    "back-half perplexity under the length multiplier m(n; xi), per xi and n_eval (Hayase & Karakida 2026 Fig. 1a-b)",
    "Cut a text into windows of n_eval = ratio x n_train tokens; per xi multiply every attention layer's logits by "
    "m(n; xi) = max(1, log n / log n_train)^xi (xi = 0: the model's own forward, bit for bit), with the model's "
    "own or dynamic-NTK RoPE, and score the back half of each window; the argmin xi per n_eval (Hayase & Karakida "
    "2026 §3, App. A.2).",
    "XiSweepConfig",
)
def xi_sweep(cfg) -> str:
    return (
        f"back-half sliding-window loss of {cfg.model} per n_eval, RoPE and xi ({cfg.windows} window(s) per "
        "n_eval; Hayase & Karakida 2026 App. A.2): mean cross-entropy of the scored tokens, ppl = exp, "
        "standard error over windows"
    )


@_checkpoint_command(
    "fit-xi",
    "xi_hat_Lambda, xi_hat_alpha, xi_hat_Delta of saved score rows (Hayase & Karakida 2026 §4.5.1)",
    "Score tensors from any source (keys last; a row's n is its allowed keys: -inf, --mask-key or --causal mark "
    "the others): the contact triple of every row, the bucket-mean OLS slopes on log log n with bootstrap "
    "half-IQRs, and Cor. 4.9's xi_Lambda = xi_alpha - xi_Delta + 1, as `attnlab temperature` fits a "
    "checkpoint's own rows.",
    "FitXiConfig",
)
def fit_xi(cfg) -> str:
    return (
        f"growth exponents of the rows of {len(cfg.scores)} score file(s) (Hayase & Karakida 2026 §4.5.1): "
        f"xi_hat with its half-IQR over bootstrap resamples of the unit ({', '.join(cfg.unit)})"
    )


@command(
    "diagnose",
    "per-row concentration diagnostics of a saved score tensor",
    "Run the diagnostics engine on a saved score tensor (keys on the last axis; .npy, .safetensors or .pt) "
    "and print a summary per bias b.",
    "attnlab.analyses.diagnose:DiagnoseConfig",
)
def diagnose(cfg) -> int:
    from attnlab.analyses.diagnose import run

    shape, rows, summary = run(cfg)
    print(
        f"{cfg.scores}: {rows} rows of {shape[-1]} keys (shape {shape}), statistics in float64; fractions over "
        "active rows with Wilson 95% intervals"
    )
    print_table(summary)
    if cfg.out is not None:
        print(f"wrote {cfg.out}")
    return 0


@_checkpoint_command(
    "matched",
    "matched argmax-concentration diagnostic on a fixed head set (Polynomial Concentration §5.5)",
    "Read the final-query row of every prompt and, per ReLU recipe, over all heads and over the head set fixed "
    "by an ablation ranking (--ranking ABLATE_DIR, its top --k) or given (--heads): measured-safe, "
    "predicted-safe (p >= p*) and eps-relaxed shares with prompt-bootstrap intervals, and the bound's FN "
    "(Polynomial Concentration Tables 4-5, 12-13).",
    "MatchedConfig",
)
def matched(cfg) -> str:
    return (
        f"matched diagnostic of {cfg.model} on {cfg.suite} ({cfg.prompts} prompts, final-query rows, "
        f"{'--ranking ' + cfg.ranking + f' top-{cfg.k}' if cfg.ranking else 'heads ' + ' '.join(cfg.heads)}); "
        f"% with {cfg.n_boot}-resample prompt-bootstrap intervals, FN = predicted safe but S_p >= 1"
    )
