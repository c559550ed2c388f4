"""The shared Registry keeps registration order, refuses silent overwrites and bad names, and names every allowed entry in its lookup error."""

from __future__ import annotations

import pytest

from attnlab.registry import Registry


def test_order_decorator_and_mapping_view():
    reg: Registry[int] = Registry("widget")
    reg.register("b", 2)

    @reg.register("a")
    def a():
        return 1

    assert list(reg) == ["b", "a"] and len(reg) == 2 and reg["a"] is a and "b" in reg
    assert reg.find("b") == 2 and dict(reg) == {"b": 2, "a": a}


def test_overwrite_needs_replace():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a", 2)
    assert reg["a"] == 1
    reg.register("a", 3, replace=True)
    assert reg["a"] == 3


@pytest.mark.parametrize("name", ["", " a", "a ", None, 3])
def test_bad_names_rejected(name):
    with pytest.raises(ValueError, match="non-empty string"):
        Registry("widget").register(name, 1)


def test_unknown_name_lists_allowed_ones():
    reg: Registry[int] = Registry("widget")
    reg.register("x", 1)
    reg.register("y", 2)
    with pytest.raises(ValueError, match=r"unknown widget 'z'; choose one of x, y"):
        reg.find("z")
    with pytest.raises(ValueError, match="unknown widget"):
        reg.find(["x"])
    with pytest.raises(KeyError):
        reg["z"]
    assert reg.unregister("x") == 1 and list(reg) == ["y"]
    with pytest.raises(ValueError, match="unknown widget 'x'"):
        reg.unregister("x")
