"""The device part of the GPU check (``benchmarks/gpu.py`` runs it): commands that the tests run only on CPU tensors,
run on the GPU and on the CPU in the same process, with the largest difference between the two.

Each case is one command as a user calls it with ``--device``: ``audit`` and ``substitute`` on an untrained Llama
(the concentration study's build) saved with attnlab's offline word tokenizer (float32 on both devices, so that the
difference is the device's arithmetic, not the dtype's), ``diagnose``'s row statistics on random score rows, and a
``lengthgen`` cell trained on each device. A case that fails is recorded with its error, not raised: the first GPU
run is where such failures show. Trained cells may differ in their accuracy (float sums in another order), which the
table shows; the untrained reads must agree to float32 rounding.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from pathlib import Path


def _checkpoint(folder: Path) -> Path:
    """The concentration study's smoke model (2 layers x 4 heads x 64), untrained, and its word tokenizer, saved
    as a user would have it."""
    import torch

    from attnlab.studies.concentration import plan as concentration_plan
    from attnlab.studies.concentration.train import _tokenizer, build

    tok = _tokenizer()
    torch.manual_seed(0)
    build(concentration_plan.BUDGETS["smoke"].train, tok)[0].save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _numbers(frame):
    return frame.select_dtypes("number").to_numpy(dtype=float)


def _gap(a, b) -> float:
    """The largest absolute difference of two equal-shaped tables' numbers."""
    import numpy as np

    x, y = _numbers(a), _numbers(b)
    if x.shape != y.shape:
        raise ValueError(f"the tables differ in shape: {x.shape} and {y.shape}")
    same = (x == y) | (np.isnan(x) & np.isnan(y))  # equal infinities and both-NaN entries agree
    with np.errstate(invalid="ignore"):
        gaps = np.where(same, 0.0, np.abs(x - y))
    return float(np.max(gaps, initial=0.0))  # NaN where only one side is NaN: a disagreement that shows


def _audit(model: Path, device: str, out: Path):
    from attnlab.analyses.audit import AuditConfig, run

    cfg = AuditConfig(model=str(model), suite="induction", prompts=4, length=64, device=device, dtype="float32")
    return run(cfg, out, progress=False)["table"]


def _substitute(model: Path, device: str, out: Path):
    from attnlab.analyses.substitute import SubstituteConfig, run

    cfg = SubstituteConfig(
        model=str(model),
        suite="induction",
        prompts=4,
        length=64,
        recipes=("relu_p2_b0",),
        device=device,
        dtype="float32",
    )
    return run(cfg, out, progress=False)["table"]


def _diagnose(device: str, out: Path):
    import torch

    from attnlab.diagnostics import row_stats

    scores = torch.randn(8, 4, 64, 64, generator=torch.Generator().manual_seed(0)).to(device)
    mask = torch.ones(64, 64, dtype=torch.bool).tril().to(device)
    return row_stats(scores, mask, p=(2, 4))


def _lengthgen(device: str, out: Path):
    from attnlab.studies.lengthgen import experiment as lengthgen

    cfg = lengthgen.LengthgenConfig(
        task="copy", maps=("softmax", "entmax_a1.5"), train_len=16, eval_mult=(1, 2), steps=30
    )
    return lengthgen.run(cfg, out, device=device)["table"].reset_index()


CASES = {"audit": _audit, "substitute": _substitute, "diagnose": _diagnose, "lengthgen": _lengthgen}
NEEDS_MODEL = {"audit", "substitute"}


def commands(device, clock) -> list[dict]:
    """Every case on ``device`` and on the CPU: seconds on each, the largest difference, or the error."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = _checkpoint(root / "model")
        for name, case in CASES.items():
            if clock.left(reserve=True) <= 0:
                rows.append({"command": name, "status": "deadline: not run"})
                continue
            row: dict = {"command": name, "device": str(device)}
            try:
                got = {}
                # on the CPU (the dry run) one run: a second one on the same device would only repeat it
                places = (("device", str(device)), ("cpu", "cpu")) if device.type != "cpu" else (("cpu", "cpu"),)
                for label, where in places:
                    start = time.perf_counter()
                    args = (model,) if name in NEEDS_MODEL else ()
                    got[label] = case(*args, where, root / f"{name}-{label}")
                    row[f"{label} s"] = time.perf_counter() - start
                row["largest difference"] = _gap(got.get("device", got["cpu"]), got["cpu"])
                row["status"] = "ok"
            except Exception as exc:  # recorded, not raised: this check is where a device path first runs
                row["status"] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                row["where"] = traceback.format_exc(limit=-3).splitlines()[-4:]
            rows.append(row)
            print(f"| {name} | {row.get('largest difference', '-')} | {row['status']} |", flush=True)
    return rows
