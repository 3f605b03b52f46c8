"""How a model endpoint's URL is written where people read it: without credentials (user:password@, a query
string such as ``?api-key=...``, a fragment), and text from an endpoint without secrets in it. Pure functions,
shared by the model-judge client and the pages."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

REDACTED = "[redacted]"
# Tokens an endpoint may echo whatever the configured key: "Bearer <token>" (also Basic), and OpenAI-style
# keys ("sk-...", "sk-proj-..."). A token has a digit in it: "basic information" and "bearer shares" in a
# model's reason are words, not credentials.
_TOKENS = re.compile(
    r"\b(?:(bearer|basic)\s+(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}|sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{8,})",
    re.IGNORECASE,
)
SECRET_MIN_CHARS = 4  # a shorter "secret" would blank ordinary words of the text

# An http(s) URL inside free text, up to the first space or quote (a sentence's final full stop or comma is
# left outside): a key in its query string may hold any other character.
_URL_IN_TEXT = re.compile(r"""https?://[^\s<>"']+(?<![.,;:!?])""", re.IGNORECASE)


def endpoint_display(url: str) -> str:
    """``url`` with its userinfo, query string and fragment removed: scheme, host, port and path only.

    >>> endpoint_display("https://key:secret@llm.example.org:8443/v1/chat/completions?api-key=S#x")
    'https://llm.example.org:8443/v1/chat/completions'
    """
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unparseable URL (a bad port, an open bracket): show none of it
        return ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def urls_display(text: str) -> str:
    """``text`` with every http(s) URL in it written by ``endpoint_display`` (a description that names an
    endpoint, typed by a lead or stored before credentials were kept out of it)."""

    def shown(match: re.Match[str]) -> str:
        url, closing = match.group(0), ""
        while url.endswith(")") and url.count(")") > url.count("("):  # "(see https://...)": keep the bracket
            url, closing = url[:-1], ")" + closing
        return endpoint_display(url) + closing

    return _URL_IN_TEXT.sub(shown, text or "")


def secrets_redacted(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (the configured key, a URL's query string and its values, a password)
    and any bearer or ``sk-`` token replaced by ``[redacted]``.

    >>> secrets_redacted("Incorrect API key provided: Bearer abc123456. Also sk-proj-XYZ123456", ["abc123456"])
    'Incorrect API key provided: Bearer [redacted]. Also [redacted]'
    """
    found: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        found.add(secret)
        if "=" in secret:  # a query string: its values too
            found.update(value for _key, value in parse_qsl(secret, keep_blank_values=True))
    for secret in sorted((s for s in found if len(s) >= SECRET_MIN_CHARS), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _TOKENS.sub(lambda m: f"{m.group(1)} {REDACTED}" if m.group(1) else REDACTED, text)
