"""The one base of attnlab's user-fixable errors, and the rule for which errors derive from it.

The rule: an error a caller can fix by changing what they gave (an argument, a flag, a file, a folder, a
model, a config) derives from :class:`Error` and from the builtin callers have long caught: ``ValueError``
for a bad value, ``TypeError`` for a bad type, ``KeyError``/``LookupError`` where a name is unknown,
``FileNotFoundError`` where a file is missing. It is the module's own class where one fits (``RunError``,
``ConfigError``, ...), else :class:`ArgumentError` or :class:`ArgumentTypeError`. So ``except attnlab.Error``
catches them all and the command line prints each as one line, whichever module raised it. A bug of attnlab
(an invariant that should never fail) stays a plain exception (``AssertionError``, ``RuntimeError``) and
keeps its traceback. ``tests/test_errors_rule.py`` refuses a bare ``raise ValueError(...)``, ``TypeError``,
``KeyError``, ``LookupError`` or ``FileNotFoundError`` outside its short list of invariants.
"""

from __future__ import annotations


class Error(Exception):
    """A user-fixable error: the message says what is wrong and what is allowed."""


class ArgumentError(Error, ValueError):
    """A value the caller gave that is not allowed, where no domain error of the module fits."""


class ArgumentTypeError(Error, TypeError):
    """A value of a type the caller may not give, where no domain error of the module fits."""


class UnknownNameError(Error, KeyError):
    """A name the caller asked for (a tensor in a file, a paper's key) that is not there; the message lists what is."""

    def __str__(self) -> str:
        # KeyError's own str() quotes the message as a key; this error's message is a sentence
        return str(self.args[0]) if self.args else ""


class MissingFileError(Error, FileNotFoundError):
    """A file or folder the caller named that does not exist."""
