"""Experiments: each turns the engines into tables and figures (DESIGN.md, attnlab.experiments)."""
