"""Asking a live search engine a query: the request template (checked, then filled), the request each kind of
engine takes, the answer read within a size cap and a deadline, and the hits picked out of it.

Kinds (``Engine.Kind``): ``elasticsearch``/``opensearch`` (``POST {base}/{index}/_search``, the Query DSL body,
hits from ``hits.hits[]``: ``_id`` and ``_source`` fields), ``solr`` (``GET {base}/{collection}/select``, the
template's parameters, docs from ``response.docs[]``) and ``http`` (any JSON API, GET parameters or a POST body,
the hit list and its fields picked by JSONPath).

A template is JSON with placeholders (``{{query}}``, ``{{qid}}``, ``{{description}}``) inside its strings. It is
parsed once, and the placeholders are filled in the parsed value, which is then written out by ``json.dumps``:
a query's text is always a JSON-escaped string, never text pasted into JSON.

Whatever the engine answers, an error text leaves this module through ``secrets_redacted`` (the credentials'
value and any bearer token replaced); a redirect is not followed; an answer past ``max_answer_bytes`` or the
deadline (``timeout`` for the whole exchange) is abandoned while it is read.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpcore
import httpx
import jsonpath
from django.utils.translation import gettext as _

from judging.endpoints import REDACTED, endpoint_display, secrets_redacted
from judging.engine_models import SECRET_ENV_PATTERN, Engine, EngineSystem
from judging.formats import DOCID_MAX_LENGTH
from judging.json_depth import json_loads
from judging.services.model_client import ModelCallError, call_deadline, deadline_transport

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PLACEHOLDERS = ("query", "qid", "description")  # the query's fields a template may name
TEMPLATE_MAX_CHARS = 20_000
ERROR_CHARS = 300  # of an error answer's body quoted in the failure's reason
FIELD_MAX_CHARS = 100_000  # of a hit's title or text kept

_INDEX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._,*+-]{0,199}$")  # an index (list), a Solr collection or core
_PATH = re.compile(r"^[A-Za-z0-9._~+-]+(?:/[A-Za-z0-9._~+-]+)*/?$")


class TemplateError(ValueError):
    """A template that is not JSON, lacks ``{{query}}`` or names an unknown placeholder: where, and why."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column

    def __str__(self) -> str:
        return _("line %(line)s, column %(column)s: %(message)s") % {
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }


class EngineError(Exception):
    """One query's call failed: the reason, redacted, as the snapshot lists it."""


def _where(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def template_parse(text: str) -> Any:
    """The template's JSON value, or TemplateError naming the line and column of the first problem."""
    if len(text) > TEMPLATE_MAX_CHARS:
        raise TemplateError(
            _("the template is longer than %(n)s characters") % {"n": TEMPLATE_MAX_CHARS}, line=1, column=1
        )
    try:
        value = json_loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            _("not valid JSON: %(msg)s") % {"msg": exc.msg}, line=exc.lineno, column=exc.colno
        ) from None
    except ValueError as exc:  # nested too deep (json_depth)
        raise TemplateError(str(exc), line=1, column=1) from None
    names = []
    for match in PLACEHOLDER.finditer(text):
        names.append(match.group(1))
        if match.group(1) not in PLACEHOLDERS:
            line, column = _where(text, match.start())
            raise TemplateError(
                _("unknown placeholder {{%(name)s}} (known: %(known)s)")
                % {"name": match.group(1), "known": ", ".join("{{" + p + "}}" for p in PLACEHOLDERS)},
                line=line,
                column=column,
            )
    if "query" not in names:
        line, column = _where(text, len(text.rstrip()))
        raise TemplateError(_("the template has no {{query}} placeholder"), line=line, column=column)
    return value


def template_fill(value: Any, fields: Mapping[str, str]) -> Any:
    """``value`` (a parsed template) with each placeholder in its strings (keys too) replaced by the field's
    text. The result is a JSON value again: written out by json.dumps, the text is escaped whatever it holds."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: fields.get(m.group(1), ""), value)
    if isinstance(value, list):
        return [template_fill(v, fields) for v in value]
    if isinstance(value, dict):
        return {template_fill(k, fields): template_fill(v, fields) for k, v in value.items()}
    return value


def target_check(kind: str, target: str) -> str:
    """The index, collection or path a lead chose, checked so that it stays under the engine's base URL (no
    ``..``, no query string, no other host); ValueError naming what is wrong."""
    target = target.strip()
    if kind == Engine.Kind.HTTP:
        if target and (not _PATH.match(target) or any(part in (".", "..") for part in target.split("/"))):
            raise ValueError(_("a path of letters, digits and . _ ~ + - separated by /, without . or .. parts"))
        return target
    if not _INDEX.match(target) or target in (".", ".."):
        raise ValueError(_("an index or collection name: letters, digits and . _ , * + -"))
    return target


@dataclass
class Hit:
    docid: str
    title: str = ""
    text: str = ""


@dataclass
class Sent:
    """A request as sent, for the preview: the credentials shown masked."""

    method: str
    url: str
    body: str
    headers: dict[str, str]


@dataclass
class Answer:
    hits: list[Hit]
    ms: float
    raw: str = ""  # the start of the answer's text (redacted), for the preview


def _text(value: Any) -> str | None:
    """A hit field's value as text: a string or number as is, a list by its first element (Solr's multivalued
    fields), anything else none."""
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


def _pick(item: Any, path: str) -> Any:
    """A field of a hit: a dotted key (``title``, ``meta.title``), or a JSONPath when it starts with ``$``."""
    if not path:
        return None
    if path.startswith("$"):
        found = jsonpath.findall(path, item)
        return found[0] if found else None
    for key in path.split("."):
        if not isinstance(item, dict):
            return None
        item = item.get(key)
    return item


Getter = Callable[[Any], Any]


def _getter(path: str) -> Getter | None:
    """``_pick`` for one ``path``, prepared once (a JSONPath compiled; a dotted key split) and used on every hit."""
    if not path:
        return None
    if path.startswith("$"):
        compiled = jsonpath.compile(path)

        def by_jsonpath(item: Any) -> Any:
            found = compiled.findall(item)
            return found[0] if found else None

        return by_jsonpath
    keys = path.split(".")

    def by_keys(item: Any) -> Any:
        for key in keys:
            if not isinstance(item, dict):
                return None
            item = item.get(key)
        return item

    return by_keys


_SPACE = re.compile(r"[\s\x00-\x1f\x7f]")  # white space or a control character: never in a docid


class EngineClient:
    """Asks one engine system's engine, from many threads over one pool of ``Engine.concurrency`` connections.
    ``secret``: the credentials' value (from the environment variable the engine names)."""

    def __init__(self, system: EngineSystem, *, template: Any | None = None) -> None:
        self.system, self.engine = system, system.engine
        self.template = template_parse(system.template) if template is None else template
        env = self.engine.secret_env
        # Only a variable named for engines (SECRET_ENV_PATTERN), whatever was stored around the admin's checks.
        self.secret = os.environ.get(env, "") if env and SECRET_ENV_PATTERN.match(env) else ""
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if self.secret:
            headers["Authorization"] = self.secret
        n = self.engine.concurrency
        self._http = httpx.Client(
            transport=deadline_transport(n),
            headers=headers,
            follow_redirects=False,
            trust_env=False,
            timeout=self.engine.timeout,
        )
        base = self.engine.base_url.rstrip("/")
        target = system.target.strip("/")
        kind = self.engine.kind
        if kind in (Engine.Kind.ELASTICSEARCH, Engine.Kind.OPENSEARCH):
            self.method, self.url = "POST", f"{base}/{target}/_search"
        elif kind == Engine.Kind.SOLR:
            self.method, self.url = "GET", f"{base}/{target}/select"
        else:
            self.method, self.url = system.method, f"{base}/{target}" if target else base
        self.id_name = system.id_field.strip() or (
            "_id" if kind in (Engine.Kind.ELASTICSEARCH, Engine.Kind.OPENSEARCH) else "id"
        )
        try:
            self._get = {which: self._field_getter(which) for which in ("id", "title", "text")}
        except jsonpath.JSONPathError as exc:
            raise EngineError(_("a field's JSONPath: %(error)s") % {"error": exc}) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the request

    def request(self, fields: Mapping[str, str]) -> tuple[dict[str, Any] | None, bytes | None]:
        """(query parameters, body) for one query."""
        filled = template_fill(self.template, fields)
        depth = self.system.depth
        kind = self.engine.kind
        if kind in (Engine.Kind.ELASTICSEARCH, Engine.Kind.OPENSEARCH):
            if not isinstance(filled, dict):
                raise EngineError(_("the template must be a JSON object (the search body)"))
            filled.setdefault("size", depth)
            return None, json.dumps(filled).encode()
        if kind == Engine.Kind.SOLR or self.method == "GET":
            if not isinstance(filled, dict):
                raise EngineError(_("the template must be a JSON object of parameters"))
            params = dict(filled)
            if kind == Engine.Kind.SOLR:
                params.setdefault("rows", depth)
                params.setdefault("wt", "json")
            return params, None
        return None, json.dumps(filled).encode()

    def sent(self, fields: Mapping[str, str]) -> Sent:
        """The request for ``fields`` as the preview shows it (the Authorization header masked)."""
        params, body = self.request(fields)
        url = endpoint_display(self.url)
        if params:
            url += "?" + urlencode(self._params(params), doseq=True)
        headers = {"Authorization": REDACTED} if self.secret else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        shown = json.dumps(json.loads(body), indent=2, ensure_ascii=False) if body else ""
        return Sent(method=self.method, url=self.clean(url), body=self.clean(shown), headers=headers)

    @staticmethod
    def _params(params: Mapping[str, Any]) -> list[tuple[str, str | int | float | bool | None]]:
        out: list[tuple[str, str | int | float | bool | None]] = []
        for key, value in params.items():
            for v in value if isinstance(value, list) else [value]:
                out.append((key, v if isinstance(v, str) else json.dumps(v)))
        return out

    # ------------------------------------------------------------------ the call

    def search(self, fields: Mapping[str, str], *, keep_raw: bool = False) -> Answer:
        """Ask the engine; EngineError (its reason redacted) on any failure."""
        params, body = self.request(fields)
        started = time.monotonic()
        deadline = started + self.engine.timeout
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            with (
                call_deadline(self.engine.timeout),
                self._http.stream(
                    self.method,
                    self.url,
                    params=self._params(params) if params else None,
                    content=body,
                    headers=headers,
                ) as answer,
            ):
                status = answer.status_code
                payload = self._read(answer, deadline)
                location = answer.headers.get("Location", "")
        except (httpx.TimeoutException, httpcore.TimeoutException):
            raise EngineError(_("no whole answer within %(s)s s") % {"s": f"{self.engine.timeout:g}"}) from None
        except ModelCallError as exc:  # a link-local address (a cloud's metadata service): never called
            raise EngineError(self.clean(str(exc))) from None
        except (httpx.TransportError, httpcore.NetworkError) as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise EngineError(
                self.clean(_("the engine could not be reached (%(detail)s)") % {"detail": detail})
            ) from None
        ms = (time.monotonic() - started) * 1000
        if 300 <= status < 400:
            raise EngineError(
                self.clean(
                    _("HTTP %(status)s: a redirect (to %(where)s), which is not followed")
                    % {"status": status, "where": endpoint_display(location) or "?"}
                )
            )
        if status >= 400:
            quoted = payload[:ERROR_CHARS].decode("utf-8", "replace")
            raise EngineError(self.clean(f"HTTP {status}: {quoted}"))
        try:
            data = json_loads(payload)
        except ValueError:
            raise EngineError(
                self.clean(_("the answer is not JSON: %(start)s") % {"start": payload[:80].decode("utf-8", "replace")})
            ) from None
        hits = self.hits(data)
        raw = self.clean(payload[:4000].decode("utf-8", "replace")) if keep_raw else ""
        return Answer(hits=hits, ms=ms, raw=raw)

    def _read(self, answer: httpx.Response, deadline: float) -> bytes:
        """The answer's body, read a piece at a time: EngineError past the size cap or the deadline (a server
        dripping bytes), and for a compressed answer (asked for none: its inflated size is unbounded)."""
        cap = self.engine.max_answer_bytes
        too_large = _("the answer was larger than %(n)s bytes; it was not read further") % {"n": cap}
        length = answer.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > cap:
            raise EngineError(too_large)
        encoding = answer.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise EngineError(
                _("the answer came compressed (%(enc)s), which was not asked for") % {"enc": encoding[:40]}
            )
        out = bytearray()
        for chunk in answer.iter_raw():  # each piece as it comes (a chunk size would wait to fill it)
            out += chunk
            if len(out) > cap:
                raise EngineError(too_large)
            if time.monotonic() > deadline:
                raise EngineError(_("no whole answer within %(s)s s") % {"s": f"{self.engine.timeout:g}"})
        return bytes(out)

    # ------------------------------------------------------------------ the answer

    def hits(self, data: Any) -> list[Hit]:
        """The hits of an answer, at most ``depth``, in the engine's order; EngineError for an answer of another
        shape, a hit without its id, an id twice."""
        kind = self.engine.kind
        system = self.system
        items: Sequence[Any]
        if kind in (Engine.Kind.ELASTICSEARCH, Engine.Kind.OPENSEARCH):
            items = _pick(data, "hits.hits")
            where = "hits.hits"
        elif kind == Engine.Kind.SOLR:
            items = _pick(data, "response.docs")
            where = "response.docs"
        else:
            where = system.hits_path or "$"
            try:
                found = jsonpath.findall(where, data)
            except jsonpath.JSONPathError as exc:
                raise EngineError(
                    _("the hit list's JSONPath %(path)s: %(error)s") % {"path": where, "error": exc}
                ) from None
            items = found[0] if len(found) == 1 and isinstance(found[0], list) else found
        if not isinstance(items, list):
            raise EngineError(_("the answer has no hit list at %(where)s") % {"where": where})
        out: list[Hit] = []
        seen: dict[str, int] = {}
        get_id, get_title, get_text = self._get["id"], self._get["title"], self._get["text"]
        scrub = self._scrub
        for rank, item in enumerate(items[: system.depth], start=1):
            docid = _text(get_id(item)) if get_id else None
            if docid is None or not docid.strip():
                raise EngineError(_("hit %(rank)s has no id (%(field)s)") % {"rank": rank, "field": self.id_name})
            if len(docid) > DOCID_MAX_LENGTH or _SPACE.search(docid):
                raise EngineError(
                    self.clean(
                        _("hit %(rank)s: the id %(id)s is longer than %(n)s characters or holds white space")
                        % {"rank": rank, "id": repr(docid[:60]), "n": DOCID_MAX_LENGTH}
                    )
                )
            if docid in seen:
                raise EngineError(
                    self.clean(
                        _("the id %(id)s comes twice (hits %(a)s and %(b)s)")
                        % {"id": repr(docid[:60]), "a": seen[docid], "b": rank}
                    )
                )
            seen[docid] = rank
            title = (_text(get_title(item)) or "") if get_title else ""
            text = (_text(get_text(item)) or "") if get_text else ""
            out.append(Hit(docid=docid, title=scrub(title[:FIELD_MAX_CHARS]), text=scrub(text[:FIELD_MAX_CHARS])))
        return out

    def _field_getter(self, which: str) -> Getter | None:
        """How a hit's id, title or text is read, for this engine's kind and the system's fields."""
        system = self.system
        path = {"id": system.id_field, "title": system.title_field, "text": system.text_field}[which].strip()
        if self.engine.kind in (Engine.Kind.ELASTICSEARCH, Engine.Kind.OPENSEARCH):
            if which == "id" and not path:
                return _getter("_id")
            return _getter(path if not path or path.startswith("$") else f"_source.{path}")
        if which == "id":
            path = path or "id"
        return _getter(path)

    def _scrub(self, text: str) -> str:
        """A title or text as stored: without the credentials, and without NUL (PostgreSQL's text refuses it)."""
        if "\x00" in text:
            text = text.replace("\x00", "\ufffd")
        return text.replace(self.secret, REDACTED) if self.secret and len(self.secret) >= 4 else text

    def clean(self, text: str) -> str:
        """Text about a call or from the engine without the credentials or a bearer token."""
        return secrets_redacted(text, [self.secret] if self.secret else [])


class RateLimit:
    """At most ``rate`` calls a second across threads (0: no limit): each call waits for its slot."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


@dataclass
class Fetched:
    """Every query's docids in the engine's order, or why it failed; each document's title and text once (the
    first hit that named it), so memory grows with the distinct documents, not with queries x depth."""

    hits: dict[str, list[str]] = field(default_factory=dict)
    documents: dict[str, tuple[str, str]] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)


QueryFields = tuple[str, str, str]  # qid, text, description


def engine_fetch_queries(
    *, system: EngineSystem, queries: Iterable[QueryFields], progress: Callable[[int], None] | None = None
) -> Fetched:
    """Ask the engine every query, ``Engine.concurrency`` at a time within its rate limit (no database
    work: threads only call and read). Each failure is kept with its query's qid and reason."""
    fetched = Fetched()
    limit = RateLimit(system.engine.rate_limit)
    lock = threading.Lock()

    with EngineClient(system) as client:

        def one(q: QueryFields) -> None:
            qid, text, description = q
            limit.wait()
            try:
                answer = client.search({"query": text, "qid": qid, "description": description})
            except EngineError as exc:
                with lock:
                    fetched.failures.append({"qid": qid, "reason": str(exc)})
            except Exception as exc:  # noqa: BLE001 - one query's unforeseen failure is that query's, listed
                with lock:
                    fetched.failures.append({"qid": qid, "reason": client.clean(f"{type(exc).__name__}: {exc}")})
            else:
                with lock:
                    fetched.hits[qid] = [h.docid for h in answer.hits]
                    for h in answer.hits:
                        if h.docid not in fetched.documents:
                            fetched.documents[h.docid] = (h.title, h.text)
                    fetched.ms.append(answer.ms)
            if progress is not None:
                progress(1)

        with ThreadPoolExecutor(max_workers=system.engine.concurrency, thread_name_prefix="engine") as pool:
            for _done in pool.map(one, queries):
                pass
    fetched.failures.sort(key=lambda f: f["qid"])
    return fetched
