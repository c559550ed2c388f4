"""Every token task is solved exactly from the input prefix alone by an independent reference solver and gives no
answer away by teacher forcing; trigger averaging's target is the mean of the tokens before its trigger."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.tasks.synthetic import TASKS, exact_match, get_task, trigger_mask

ROWS = 300
# Per task: a length whose rows hold several items, and an odd/even sibling to exercise padding.
LENGTHS = {
    "mqmtar": (64, 77),
    "mqar": (64, 50),
    "max_retrieval": (35, 36),
    "copy": (24, 25),
    "reverse": (24, 25),
    "sort": (24, 25),
    "2back": (24, 7),
    "local_count": (40, 9),
    "flipflop_sparse": (33, 34),
    "flipflop_dense": (33, 34),
    "niah_small": (24, 6),
    "induction_small": (24, 6),
}
TOKEN_TASKS = sorted(LENGTHS)


# Reference solvers: each reads only ``prefix`` = ids[:t+1], the row length and the task's published
# specials and parameters, and returns the prediction at position t (next token, or class).


def _transduce(order):
    def solve(task, prefix, length):
        sp = task.specials
        sep = prefix.index(sp["sep"])
        wanted = order(prefix[1:sep]) + [sp["eos"]]
        return wanted[len(prefix) - sep - 1]

    return solve


def _two_back(task, prefix, length):
    t = len(prefix) - 1
    return prefix[t - 2] if t - 2 >= 1 else 0


def _local_count(task, prefix, length):
    t, k = len(prefix) - 1, len(prefix) - 1
    while k - 1 >= 1 and prefix[k - 1] == prefix[t]:
        k -= 1
    return t - k


def _flipflop(task, prefix, length):
    sp = task.specials
    if prefix[-1] != sp["r"]:
        return sp["eos"]
    last_write = max(i for i, x in enumerate(prefix) if x == sp["w"])
    return prefix[last_write + 1]


def _mqmtar(task, prefix, length):
    sp, kl, vl = task.specials, task.key_len, task.value_len
    sep = prefix.index(sp["sep"])
    before = prefix[:sep]
    first_query = before.index(sp["query"])
    table = {
        tuple(before[i - kl : i]): before[i + 1 : i + 1 + vl]
        for i, x in enumerate(before[:first_query])
        if x == sp["kv"]
    }
    asked = [tuple(before[i + 1 : i + 1 + kl]) for i, x in enumerate(before) if x == sp["query"]]
    wanted = [tok for key in asked for tok in [sp["query"], *table[key]]] + [sp["eos"]]
    return wanted[len(prefix) - sep - 1]


def _first_follower(task, prefix, length):
    """MQAR: the value stored after the first occurrence of the queried key."""
    return prefix[prefix.index(prefix[-1]) + 1]


def _planted(task, prefix, length):
    """NIAH and induction: the query key is the last input but one (the layout); then <eos>."""
    return _first_follower(task, prefix, length) if len(prefix) == length - 1 else task.specials["eos"]


def _max_retrieval(task, prefix, length):
    sp = task.specials
    sep = prefix.index(sp["sep"])
    if len(prefix) - 1 > sep:
        return sp["eos"]
    items = prefix[1:sep]
    best = int(np.argmax(items[0::2]))
    return items[2 * best + 1]


SOLVERS = {
    "copy": _transduce(list),
    "reverse": _transduce(lambda x: x[::-1]),
    "sort": _transduce(sorted),
    "2back": _two_back,
    "local_count": _local_count,
    "flipflop_sparse": _flipflop,
    "flipflop_dense": _flipflop,
    "mqmtar": _mqmtar,
    "mqar": _first_follower,
    "niah_small": _planted,
    "induction_small": _planted,
    "max_retrieval": _max_retrieval,
}


def _solve(name, batch):
    """Predictions at every scored position from the prefixes only; -1 elsewhere."""
    task = TASKS[name]
    ids, targets = batch.ids.tolist(), batch.targets
    predictions = torch.full_like(targets, -1)
    for r, t in (targets != -100).nonzero().tolist():
        predictions[r, t] = SOLVERS[name](task, ids[r][: t + 1], targets.shape[1])
    return predictions


@pytest.mark.parametrize("name", TOKEN_TASKS)
def test_reference_solver_is_exact(name):
    for length in LENGTHS[name]:
        batch = TASKS[name].generate(ROWS, length, seed=11)
        assert batch.ids.shape == batch.targets.shape == (ROWS, length)
        assert batch.ids.dtype == batch.targets.dtype == torch.long
        assert ((batch.targets != -100).sum(1) >= 1).all()
        assert exact_match(_solve(name, batch), batch.targets).all()


def test_solvers_are_not_vacuous():
    """A corrupted target is caught, so the exact-match check above has teeth."""
    batch = TASKS["mqmtar"].generate(20, 64, seed=1)
    targets = batch.targets.clone()
    r, t = (targets != -100).nonzero()[5].tolist()
    targets[r, t] = (targets[r, t] + 1) % TASKS["mqmtar"].vocab_size
    assert exact_match(_solve("mqmtar", batch), targets).sum() == 19


GENERATIVE = [n for n in TOKEN_TASKS if TASKS[n].kind == "generative"]


@pytest.mark.parametrize("name", GENERATIVE)
def test_generative_targets_are_teacher_forced_next_tokens(name):
    """targets[t] = ids[t+1] at scored t; the model never sees a scored answer at or before its own position."""
    for length in LENGTHS[name]:
        batch = TASKS[name].generate(ROWS, length, seed=5)
        ids, targets = batch.ids, batch.targets
        scored = targets != -100
        inner = scored[:, :-1]
        assert torch.equal(ids[:, 1:][inner], targets[:, :-1][inner])
        # Echoing the current input never solves a row.
        assert not ((ids == targets) | ~scored).all(dim=1).any()
        if name != "mqar":  # one answer block after the question; MQAR's queries are scattered
            first = scored.float().argmax(dim=1)
            last = length - 1 - scored.flip(1).float().argmax(dim=1)
            assert torch.equal(last - first + 1, scored.sum(1))


def test_trigger_averaging_target_is_the_mean_of_strictly_preceding_tokens():
    task = get_task("trigger_averaging")
    batch = task.generate(ROWS, 16, seed=8)
    x, y = batch.inputs.double(), batch.targets.double()
    assert torch.equal(trigger_mask(batch.inputs), batch.mask) and (batch.mask.sum(1) == 1).all()
    for r in range(ROWS):
        j = int(batch.mask[r].nonzero())  # 0-based trigger
        expected = x[r, 1:j].mean(0)
        assert torch.allclose(y[r, j], expected, atol=1e-6)
        assert y[r][~batch.mask[r]].abs().sum() == 0
        # The trigger itself and later tokens are not in the average.
        assert not torch.allclose(x[r, 1 : j + 1].mean(0), expected)
