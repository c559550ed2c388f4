"""The card command's config (``CardConfig``, then the ``CardPlan`` made from it) is handed only downward, through a
few modules, and returns to a higher layer only where the plan is made: traced at run time on a tiny card (slow:
the profiler slows the run threefold)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from attnlab.cards import build as cards
from attnlab.cli import main
from attnlab.cli.card import CardConfig
from cards.test_card import TINY
from checkpoints import save_checkpoint
from test_layers import _layer

CONFIG = (CardConfig, cards.CardPlan)
MAX_MODULES, MAX_CLIMBS = 13, 5


def _holds(value) -> bool:
    if isinstance(value, CONFIG):
        return True
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, CONFIG) for v in value)
    return isinstance(value, dict) and any(isinstance(v, CONFIG) for v in value.values())


def _arguments(frame) -> list:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    return [frame.f_locals.get(name) for name in code.co_varnames[:count]]


class Route:
    """Each call of an attnlab function whose arguments hold the config, and each return of a config object from
    one module to a module of a higher layer."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.climbs: list[tuple[str, str, str]] = []

    def __call__(self, frame, event, arg) -> None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("attnlab."):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if event == "call" and any(_holds(v) for v in _arguments(frame)):
            self.calls.append((module, frame.f_code.co_name))
        elif event == "return" and isinstance(arg, CONFIG) and caller.startswith("attnlab."):
            if _layer(caller)[0] < _layer(module)[0]:
                self.climbs.append((module, frame.f_code.co_name, caller))

    def modules(self) -> list[str]:
        return list(dict.fromkeys(module for module, _ in self.calls))


@pytest.mark.slow
def test_the_card_config_flows_down_through_few_modules(tmp_path, monkeypatch):
    checkpoint = save_checkpoint(tmp_path / "ckpt")
    monkeypatch.setitem(cards.PLANS, "quick", dataclasses.replace(cards.PLANS["quick"], **TINY))
    route = Route()
    sys.setprofile(route)
    try:
        code = main(["card", str(checkpoint), "--out", str(tmp_path / "out"), "--no-progress"])
    finally:
        sys.setprofile(None)
    assert code == 0
    modules = route.modules()
    assert modules[0] == "attnlab.cli.card" and len(modules) <= MAX_MODULES, modules
    assert len(route.climbs) <= MAX_CLIMBS, route.climbs
    # the config never reaches a layer below the card's own (the analyses take numbers, not the card's plan)
    assert all(_layer(m)[1] in ("cli", "cards", "devices") for m in modules), modules
