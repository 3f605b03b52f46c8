"""The chat-completions client that asks a model judge (OpenAI's protocol, ``POST .../chat/completions``).

One httpx pool of keep-alive connections shared by the run's threads, a deadline for each attempt as a whole
(every connect, read and write cut to the time left, so a server dripping its answer is cut off), a cap on the
answer's size (read as a stream, inflated size counted), retries with exponential backoff on 429, 5xx,
timeouts and dropped connections. The key comes from ``RELJUDGE_MODEL_API_KEY`` only and is sent as a Bearer
token; pages, the API and logs name the endpoint without user info or query string (``Endpoint.display``).

Whatever the endpoint answers is redacted before it leaves this module (``secrets_redacted``): the configured key
and any ``Bearer ...`` or ``sk-...`` token are replaced, so that an endpoint echoing the key (``Incorrect API key
provided: Bearer ...``) puts it in no job result, judgment note, page or log. A redirect (3xx) is not followed
and not read as an answer: the call fails, naming the status, and its pair stays unjudged.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
from django.conf import settings

from judging.endpoints import endpoint_display, secrets_redacted
from judging.json_depth import json_loads

ENDPOINT_ENV = "RELJUDGE_MODEL_ENDPOINT"
API_KEY_ENV = "RELJUDGE_MODEL_API_KEY"


ERROR_CHARS = 300  # of an error answer's body quoted in the failure's reason


class ModelCallError(Exception):
    """A call that failed for good (after the retries, or at once for a 4xx other than 429, an answer
    larger than the cap, or one in an encoding the client cannot bound)."""


class _TooLarge(Exception):
    pass


@dataclass
class Endpoint:
    """An OpenAI-compatible chat-completions endpoint."""

    url: str = field(repr=False)  # its query string may hold a key: shown only as ``display``
    model: str
    api_key: str = field(default="", repr=False)
    timeout: float = 60.0  # seconds one attempt may take in all: connecting, sending, and the whole answer
    retries: int = 4
    backoff: float = 0.5  # seconds before the first retry, doubled each time (with jitter)
    temperature: float = 0.0
    max_tokens: int = 200
    max_answer_bytes: int = 1024 * 1024  # a chat completion of max_tokens is a few kB; past this, stop reading

    @classmethod
    def configured(cls, *, url: str | None, model: str, **kw: Any) -> Endpoint:
        """The endpoint from ``url`` or the environment; ValueError when none is configured."""
        url = (url or os.environ.get(ENDPOINT_ENV, "")).strip()
        if not url:
            raise ValueError(f"no model endpoint: pass --endpoint URL or set {ENDPOINT_ENV}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the endpoint must be an http(s) URL, not {endpoint_display(url)!r}")
        if link_local(parts.hostname) and not link_local_allowed():
            raise ValueError(LINK_LOCAL_REFUSED % endpoint_display(url))
        if not parts.path.rstrip("/").endswith("/chat/completions"):
            path = parts.path.rstrip("/") + "/chat/completions"
            url = urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        return cls(url=url, model=model, api_key=os.environ.get(API_KEY_ENV, ""), **kw)

    @property
    def display(self) -> str:
        """The URL as pages, the API and logs may show it: without user info, query string or fragment."""
        return endpoint_display(self.url)


LINK_LOCAL_REFUSED = (
    "the endpoint %s is at a link-local address (169.254.0.0/16, fe80::/10: where cloud machines answer with "
    "their metadata and credentials), which is refused unless RELJUDGE_MODEL_ALLOW_LINK_LOCAL=1"
)


def link_local(host: str) -> bool:
    """Whether ``host`` is a link-local IP address (IPv4 169.254.0.0/16, IPv6 fe80::/10, or IPv4 link-local
    written as IPv6); a name is not (its addresses are checked when the call connects)."""
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_link_local or (mapped is not None and mapped.is_link_local))


def link_local_allowed() -> bool:
    return bool(getattr(settings, "RELJUDGE_MODEL_ALLOW_LINK_LOCAL", False))


_deadline = threading.local()  # the calling thread's attempt: when it must be over (time.monotonic())


def _left(timeout: float | None) -> float | None:
    """``timeout`` cut to what is left of the calling thread's deadline; ReadTimeout once it has passed."""
    end: float | None = getattr(_deadline, "at", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every wait ends by the deadline of the attempt using it."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _checked_addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to; ModelCallError (not retried) when any is link-local."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"{host}: {exc.strerror or exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not addresses or any(link_local(a) for a in addresses):
        raise ModelCallError(LINK_LOCAL_REFUSED % host)
    return addresses


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, wrapped in _DeadlineStream. Per-read timeouts alone let a server that sends
    a byte every few seconds hold a call for ever; cutting each wait to the time left bounds the whole."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        # A name may resolve to a link-local address (a metadata service's name, or DNS changed since the
        # endpoint was configured): connect only to addresses checked here, never to one resolved again.
        addresses = [host] if link_local_allowed() else _checked_addresses(host, port)
        for i, address in enumerate(addresses):
            try:
                stream = self._backend.connect_tcp(address, port, _left(timeout), local_address, socket_options)
            except httpcore.ConnectError:
                if i == len(addresses) - 1:
                    raise
                continue
            return _DeadlineStream(stream)
        raise httpcore.ConnectError(f"{host}: no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_transport(connections: int) -> httpx.HTTPTransport:
    """httpx's transport around a pool of ``connections`` kept alive whose every connect, read and write is cut
    to the calling thread's deadline (``call_deadline``), with no link-local address (a metadata service) and
    TCP_NODELAY set. Shared by the model judge's client and the search engines' (services.engine_client)."""
    transport = httpx.HTTPTransport()
    transport._pool = httpcore.ConnectionPool(  # httpx's transport around a pool with the deadline backend
        ssl_context=httpx.create_ssl_context(),
        max_connections=connections,
        max_keepalive_connections=connections,
        network_backend=_DeadlineBackend(),
        # TCP_NODELAY, as urllib3 sets it: with Nagle's algorithm a request written in two pieces waits
        # for the peer's delayed ACK, 40 ms a call on Linux.
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    return transport


@contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Within this block, the calling thread's calls through a ``deadline_transport`` end by ``seconds`` from now:
    connecting, sending and reading the whole answer (a server dripping its answer is cut off)."""
    _deadline.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline.at = None


class ChatClient:
    """Calls one endpoint from many threads over one httpx connection pool (``connections`` kept alive).

    Each attempt has a deadline for the whole exchange (``Endpoint.timeout``: connecting, sending and the
    whole answer), not only per read. The answer is read as a stream and abandoned past
    ``Endpoint.max_answer_bytes``, so that a huge answer costs the worker that much memory at most.
    """

    CHUNK = 16 * 1024

    def __init__(self, endpoint: Endpoint, *, connections: int = 8) -> None:
        self.endpoint = endpoint
        headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        transport = deadline_transport(connections)
        self._http = httpx.Client(transport=transport, headers=headers, follow_redirects=False, trust_env=False)
        # The key goes as a Bearer token: user info in the URL is dropped, never sent as Basic credentials.
        parts = urlsplit(endpoint.url)
        netloc = parts.netloc.rpartition("@")[2]
        self._url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The assistant message's text; retries 429, 5xx, timeouts and broken connections with backoff."""
        body = json.dumps(
            {
                "model": self.endpoint.model,
                "messages": messages,
                "temperature": self.endpoint.temperature,
                "max_tokens": self.endpoint.max_tokens,
            }
        ).encode()
        problem = ""
        for attempt in range(self.endpoint.retries + 1):
            if attempt:
                delay = self.endpoint.backoff * 2 ** (attempt - 1)
                time.sleep(delay * (0.5 + random.random()))  # jitter: 8 workers must not retry in lockstep
            try:
                status, retry_after, location, payload = self._attempt(body)
            except ModelCallError:
                raise
            except _TooLarge:
                raise ModelCallError(
                    f"the answer was larger than {self.endpoint.max_answer_bytes} bytes; it was not read further"
                ) from None
            except httpx.TimeoutException:
                problem = f"no whole answer within {self.endpoint.timeout:g} s"
                continue
            except (OSError, httpx.TransportError) as exc:
                problem = self._clean(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
                continue
            if status == 429 or status >= 500:
                problem = f"HTTP {status}"
                if retry_after and retry_after.isdigit() and attempt < self.endpoint.retries:
                    time.sleep(min(float(retry_after), 30.0))
                continue
            if 300 <= status < 400:
                # Never followed (the key would go wherever it points) and never read as the model's answer.
                raise ModelCallError(
                    self._clean(
                        f"HTTP {status}: the endpoint answered with a redirect, which is not followed "
                        f"(to {endpoint_display(location or '') or 'no address'}): configure the address it "
                        "redirects to"
                    )
                )
            if status >= 400:
                raise ModelCallError(self._clean(f"HTTP {status}: {payload[:ERROR_CHARS].decode('utf-8', 'replace')}"))
            try:
                content = json_loads(payload)["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                # A reply that is not a chat completion at all: the model's fault, not the network's.
                content = payload.decode("utf-8", "replace")
            return self._clean(str(content))
        raise ModelCallError(f"gave up after {self.endpoint.retries + 1} attempts ({problem})")

    def _attempt(self, body: bytes) -> tuple[int, str | None, str | None, bytes]:
        """One request: (status, Retry-After, Location, the answer's body), within the deadline and the size cap."""
        _deadline.at = time.monotonic() + self.endpoint.timeout
        try:
            with self._http.stream("POST", self._url, content=body, timeout=self.endpoint.timeout) as answer:
                headers = answer.headers
                return answer.status_code, headers.get("Retry-After"), headers.get("Location"), self._read(answer)
        finally:
            _deadline.at = None

    def _read(self, response: httpx.Response) -> bytes:
        cap = self.endpoint.max_answer_bytes
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > cap:
            raise _TooLarge
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            # Inflated here, never past the cap: a small compressed answer can inflate a thousandfold.
            inflate = zlib.decompressobj(47)  # 32 + 15: a gzip or a zlib header, whichever comes
        elif encoding in ("", "identity"):
            inflate = None
        else:
            raise ModelCallError(f"the answer came in an encoding this client does not read ({encoding[:40]})")
        out = bytearray()
        for chunk in response.iter_raw(self.CHUNK):
            if inflate is not None:
                chunk = inflate.decompress(chunk, cap + 1 - len(out))
            out += chunk
            if len(out) > cap:
                raise _TooLarge
        return bytes(out)

    def _clean(self, text: str) -> str:
        """Text from the endpoint or about a call (an error, an answer) without the endpoint's query string or
        user info (httpx may quote the URL), the configured key, or anything like a bearer token."""
        text = text.replace(self.endpoint.url, self.endpoint.display)
        parts = urlsplit(self.endpoint.url)
        secrets = [self.endpoint.api_key, parts.query, parts.password or "", parts.username or ""]
        return secrets_redacted(text, secrets)

    def close(self) -> None:
        """Close the pool's connections (call once the calls are done)."""
        self._http.close()
