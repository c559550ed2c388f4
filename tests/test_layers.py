"""Every module of attnlab imports only its own package or a layer below it, and the package root holds only the core
helpers."""

from __future__ import annotations

import ast

from test_imports import ROOT, _graph, _modules

# Top to bottom, as DESIGN.md draws them; packages in one tuple share a layer and import none of each other.
CORE = ("errors", "registry", "options", "plugins", "progress", "perf", "io", "devices", "native", "batches", "papers")
CORE += ("readback",)  # every JSON file attnlab reads back, parsed and checked (io's marker and locks read it)
LAYERS = (
    ("cli",),
    ("cards",),
    ("studies",),
    ("api",),
    ("analyses",),
    ("train", "hooks"),
    ("loading",),
    ("model", "tasks", "report"),
    ("diagnostics",),
    ("site",),
    ("rowmaps",),
    ("findings",),
    (*CORE, "workers"),
)
TOP = ("attnlab", "attnlab.__main__")  # the public API (lazy names) and `python -m attnlab` sit above every layer
EAGER = {"__version__", "Error"}  # what the root defines itself, without importing any layer: any module may read it


def _layered_graph() -> dict[str, set[str]]:
    """The import graph, less the imports of the root's own constants (``from attnlab import __version__``)."""
    modules = _modules()
    graph = _graph(modules)
    for name, path in modules.items():
        names = [
            a.name
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module == "attnlab" and node.level == 0
            for a in node.names
        ]
        if "attnlab" in graph[name] and not any(n not in EAGER and f"attnlab.{n}" not in modules for n in names):
            graph[name].discard("attnlab")
    return graph


def _layer(module: str) -> tuple[int, str]:
    """(layer index, package) of an attnlab module; the core helpers are each their own package."""
    package = module.split(".")[1]
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index, package
    raise AssertionError(f"{module}: package {package!r} is in no layer; add it to LAYERS and DESIGN.md")


def _violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        if module in TOP:
            continue
        layer, package = _layer(module)
        for target in sorted(imported):
            if target in TOP:
                found.append(f"{module} -> {target} (the public API is above every layer)")
                continue
            other, its_package = _layer(target)
            core = layer == other == len(LAYERS) - 1
            if other < layer or (other == layer and its_package != package and not core):
                found.append(f"{module} -> {target}")
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert _violations(_layered_graph()) == []


def test_the_package_root_holds_only_the_core_helpers():
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert set(loose) <= set(LAYERS[-1]), set(loose) - set(LAYERS[-1])
    packages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    assert sorted(packages) == sorted(p for layer in LAYERS[:-1] for p in layer)


def test_the_checker_finds_a_planted_upward_and_sideways_import():
    graph = {
        "attnlab.site.blockwise": {"attnlab.rowmaps.registry", "attnlab.hooks.hf"},
        "attnlab.model.decoder": {"attnlab.tasks.suites", "attnlab.site.blockwise"},
        "attnlab.io": {"attnlab.errors"},
        "attnlab.studies.runner": {"attnlab"},
    }
    assert _violations(graph) == [
        "attnlab.model.decoder -> attnlab.tasks.suites",
        "attnlab.site.blockwise -> attnlab.hooks.hf",
        "attnlab.studies.runner -> attnlab (the public API is above every layer)",
    ]
