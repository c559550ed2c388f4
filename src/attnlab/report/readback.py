"""The readers of the JSON files attnlab wrote, where report's sections and the studies first imported them: they
live in the core module ``attnlab.readback`` now, so that the layers below report (io, train, loading) share them."""

from __future__ import annotations

from attnlab.readback import MAX_BYTES, MAX_DEPTH, ReadBackError, check, parse, parse_object, read_object, read_record

__all__ = ["MAX_BYTES", "MAX_DEPTH", "ReadBackError", "check", "parse", "parse_object", "read_object", "read_record"]
