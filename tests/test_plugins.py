"""An installed package's entry points put its row maps, tasks and studies in the CLI; a broken one is named in one line."""

from __future__ import annotations

import textwrap

from attnlab import rowmaps
from attnlab.cli import main
from attnlab.rowmaps.registry import FAMILIES


def _install(site, name: str, group: str, module_text: str) -> None:
    """A distribution as pip leaves it: the module, and a dist-info folder whose entry_points.txt names it."""
    (site / f"{name}.py").write_text(textwrap.dedent(module_text))
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {name}\n")


def test_an_installed_row_map_reaches_attnlab_maps(tmp_path, monkeypatch, capsys):
    _install(
        tmp_path,
        "quartic_maps",
        "attnlab.rowmaps",
        """
        from attnlab import rowmaps

        @rowmaps.register("quartic_plugin", formula="ReLU(z_i)^4 / sum_j ReLU(z_j)^4", source="a plugin")
        def _quartic(name, match):
            return {}, lambda z: rowmaps.relu_power(z, 4.0, 0.0)
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert main(["maps"]) == 0
        assert "quartic_plugin" in capsys.readouterr().out
        assert rowmaps.get("quartic_plugin").family == "quartic_plugin"
        assert main(["maps"]) == 0  # a second load registers nothing twice
    finally:
        FAMILIES.unregister("quartic_plugin")


def test_a_plugin_that_fails_to_import_is_named_and_skipped(tmp_path, monkeypatch, capsys):
    _install(tmp_path, "broken_maps", "attnlab.rowmaps", "raise RuntimeError('no such thing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["maps"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "attnlab: plugin broken_maps (broken_maps, entry point attnlab.rowmaps) failed to load: "
        "RuntimeError: no such thing"
    ]
