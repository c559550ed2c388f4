"""Experiments: each turns the engines into tables and figures."""
