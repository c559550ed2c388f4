"""attnlab: how concentrated is attention, and what happens when the row map is changed."""

__version__ = "0.1.0"
