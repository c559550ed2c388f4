"""The one registry pattern of attnlab: every kind of named thing a user types (row-map families, score
scalers, FFNs, tasks, studies, lengthgen variants) lives in a ``Registry``, filled by the module that
defines each entry, next to its code, and open to the user's own entries:

    >>> from attnlab.model import SCALERS
    >>> @SCALERS.register("my_scale")
    ... class MyScale(nn.Module): ...

A registry is a read-only mapping from name to entry, in registration order; ``find`` is the lookup that
a user's input goes through, whose error names every allowed entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar, overload

from attnlab.errors import ArgumentError

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind (``kind`` names it in errors: "row map family", "scaler", ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    @overload
    def register(self, name: str, entry: None = None, *, replace: bool = False) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, entry: T, *, replace: bool = False) -> T: ...

    def register(self, name, entry=None, *, replace=False):
        """Add ``entry`` under ``name`` and return it; without ``entry``, a decorator that adds what it
        decorates. A name already taken raises ValueError unless ``replace``: a silent overwrite would
        change what every earlier user of the name gets."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ArgumentError(
                f"a {self.kind} name must be a non-empty string without surrounding spaces, got {name!r}"
            )

        def add(value: T) -> T:
            if name in self._entries and not replace:
                raise ArgumentError(f"{self.kind} {name!r} is already registered; pass replace=True to override it")
            self._entries[name] = value
            return value

        return add if entry is None else add(entry)

    def unregister(self, name: str) -> T:
        """Remove and return the entry ``name`` (a user's own entry, e.g. at the end of a test)."""
        self.find(name)
        return self._entries.pop(name)

    def find(self, name: str) -> T:
        """The entry ``name``; ValueError naming the allowed names otherwise."""
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        raise ArgumentError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self._entries)}")

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
