"""The caller's error apart from ours: a request parameter that is wrong (a 400 naming it), never a broken invariant.

Code below the edges (scoring, selectors, services) raises :class:`RequestError` for a value the caller chose (a
measure, a segment, a label source, a cutoff) and nothing else; the API and the pages turn it, and only it, into a
400 that names the parameter. Any other exception from inside a computation (a ``ValueError`` from a numpy
function, a ``metrics.numbers.NumberError``) is ours: it reaches Django as a 500 and is logged with the campaign,
the parameters and the stack (judging.middleware.InternalErrorLog), and a test fails on it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RequestError"]


class RequestError(ValueError):
    """A request parameter the caller chose is not valid here: ``errors`` maps the parameter's name to its
    messages (in the reader's language). A ValueError, so that library callers that catch bad arguments keep
    catching it; the edges catch this class only."""

    def __init__(self, field: str, message: Any) -> None:
        self.errors: dict[str, list[str]] = {field: [str(message)]}
        self.field = field
        super().__init__(str(message))
