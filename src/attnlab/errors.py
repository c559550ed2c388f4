"""The one base of attnlab's user-fixable errors.

Every error that names what the caller gave wrong (an argument, a file, a folder, a model, a config) derives from
:class:`Error`, besides the builtin its callers have long caught (``ValueError``, ``TypeError``...), so that
``except attnlab.Error`` catches them all and the command line prints each as one line, whichever module raised it.
Errors of attnlab itself (a bug) stay ordinary exceptions and keep their traceback.
"""

from __future__ import annotations


class Error(Exception):
    """A user-fixable error: the message says what is wrong and what is allowed."""
