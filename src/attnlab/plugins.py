"""Entries of installed packages: a package declares an entry point in one of ``GROUPS`` naming a module (or an
object in it), and importing that module registers its row maps, tasks or studies with attnlab's own decorators
(``rowmaps.register``, ``tasks.register``, ``studies.register``), as pytest and tox find their plugins:

    # the package's pyproject.toml
    [project.entry-points."attnlab.rowmaps"]
    cubic = "my_maps.cubic"

The CLI loads them once, before it builds its parser, so ``attnlab maps``, ``attnlab tasks`` and ``attnlab
study`` list the entries like attnlab's own. In Python, importing the module is enough.
"""

from __future__ import annotations

import sys
from importlib import metadata

GROUPS = ("attnlab.rowmaps", "attnlab.tasks", "attnlab.studies")


def load() -> list[str]:
    """Import every entry point of ``GROUPS`` and return "group:name" of those loaded. A module registers its
    entries when first imported and Python imports it once, so calling this again registers nothing twice. One
    that fails to import is named on stderr in one line and skipped: another package's bug must not stop attnlab."""
    loaded = []
    for group in GROUPS:
        for entry in metadata.entry_points(group=group):
            try:
                entry.load()
            except Exception as exc:  # a broken plugin is reported, never fatal
                print(
                    f"attnlab: plugin {entry.name} ({entry.value}, entry point {group}) failed to load: "
                    f"{type(exc).__name__}: {exc}",
                    file=sys.stderr,
                )
                continue
            loaded.append(f"{group}:{entry.name}")
    return loaded
