"""Automatic judges: model annotators, the chat-completions client that asks them, and storing their grades.

A model judge is a user (username = the judge's name, unusable password, inactive: it never logs in) with an
``AnnotatorProfile`` of kind "model" and an annotator membership, so every page, filter and export that lists
judgments by annotator shows it. Its judgments never enter the human labels (``labels_refresh`` leaves them
out); the leaderboard scores them only when asked (``labels=model:NAME`` or ``hybrid:NAME``).

The client speaks the OpenAI chat-completions protocol (``POST .../chat/completions``) over httpx: one pool
of keep-alive connections, ``concurrency`` requests in flight, a deadline for each attempt as a whole and a
cap on the answer's size, retries with exponential backoff on 429, 5xx, timeouts and dropped connections.
Nothing is called unless an endpoint is configured (``--endpoint`` or ``RELJUDGE_MODEL_ENDPOINT``); the key comes from
``RELJUDGE_MODEL_API_KEY`` only, never from the command line (it would land in the shell history).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import transaction
from django.utils import timezone

from judging.imports.errors import FormatError
from judging.models import AnnotatorProfile, Campaign, Judgment, JudgmentRevision, Pair
from judging.services.accounts import account_name_resolve, model_judge_membership
from judging.services.endpoints import endpoint_display, urls_display
from judging.services.judgments import labels_refresh

ENDPOINT_ENV = "RELJUDGE_MODEL_ENDPOINT"
API_KEY_ENV = "RELJUDGE_MODEL_API_KEY"
PAIR_MODES = ("unjudged", "all", "sample:N")
DOC_CHARS = 6000  # of the document's text sent in the prompt: enough to judge, bounded cost per call
NOTE_CHARS = 2000

logger = logging.getLogger(__name__)

_username = RegexValidator(r"^[\w.@+-]{1,150}\Z", "a judge name is 1-150 letters, digits and @.+-_ characters")


# --------------------------------------------------------------------------- the annotator


@transaction.atomic
def model_judge_get_or_create(*, name: str, description: str = "", campaign: Campaign | None = None) -> Account:
    """The model judge called ``name`` (created if new), made an annotator of ``campaign`` if given.

    A person's account is never turned into a model judge: ValidationError if ``name`` is a human user's.
    A non-empty ``description`` replaces the one ``campaign`` shows (the model or prompt may have changed).
    """
    _username(name)
    User = get_user_model()
    name, user = account_name_resolve(name)  # a judge's name follows the rule of every account name
    if user is None:
        user = User(username=name, is_active=False)
        user.set_unusable_password()
        user.save()
        AnnotatorProfile.objects.create(
            user=user, kind=AnnotatorProfile.Kind.MODEL, description=urls_display(description)
        )
        logger.info("model judge %s created", name)
    else:
        profile = AnnotatorProfile.objects.filter(user=user).first()
        if profile is None or profile.kind != AnnotatorProfile.Kind.MODEL:
            raise ValidationError(
                f"{name!r} is a person's account or a label source, not a model judge: choose another name"
            )
    if campaign is not None:
        model_judge_membership(campaign=campaign, user=user, description=description)
    return user


def model_judge_upload_annotator(*, name: str, campaign: Campaign, filename: str, description: str = "") -> Account:
    """The model judge a qrels upload names, as an import error (file, field) when the name is unusable."""
    try:
        return model_judge_get_or_create(name=name, description=description, campaign=campaign)
    except ValidationError as exc:
        raise FormatError(exc.messages[0], filename=filename, field="annotator") from None


# --------------------------------------------------------------------------- prompt and answer


@dataclass(frozen=True)
class PairText:
    """What the judge sees of one pair."""

    pair_id: int
    qid: str
    query: str
    description: str
    docid: str
    title: str
    text: str


def prompt_messages(*, guidelines: str, scale: Sequence[tuple[int, str, str]], pair: PairText) -> list[dict[str, str]]:
    """Chat messages asking for one grade: the campaign's guidelines and scale as the system message, the
    query (with its description of what counts as relevant) and the document as the user message."""
    steps = "\n".join(f"{v} = {name}" + (f": {desc}" if desc else "") for v, name, desc in scale)
    system = (
        "You judge how relevant a document is to a search query, as a careful human assessor would.\n"
        f"Grades:\n{steps}\n"
        + (f"Guidelines:\n{guidelines.strip()}\n" if guidelines.strip() else "")
        + 'Answer with JSON only: {"grade": <one of the grades>, "reason": "<one short sentence>"}'
    )
    user = f"Query: {pair.query}\n"
    if pair.description:
        user += f"What counts as relevant: {pair.description}\n"
    user += f"\nDocument {pair.docid}\n"
    if pair.title:
        user += f"Title: {pair.title}\n"
    user += pair.text[:DOC_CHARS]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_GRADE_WORD = re.compile(r"\bgrade\b\W{0,3}(-?\d+)", re.IGNORECASE)


def parse_answer(answer: str, grades: Iterable[int]) -> tuple[int | None, str]:
    """The grade and reason in a model's answer, or (None, note) when it cannot be read.

    Accepted: a JSON object with "grade" (and an optional "reason"), possibly in a ```json fence; a bare
    grade ("2"); or text with "grade: 2" in it. Anything else, or a grade off the scale, comes back as
    None with the raw answer in the note, so that it is stored as an unsure judgment a lead can inspect.
    """
    allowed = set(grades)
    raw = (answer or "").strip()
    text = _FENCE.sub("", raw).strip()
    grade: object = None
    reason = ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        grade, reason = parsed.get("grade"), parsed.get("reason") or ""
    elif isinstance(parsed, int) and not isinstance(parsed, bool):
        grade = parsed
    else:
        found = _GRADE_WORD.search(text)
        if found:
            grade = int(found.group(1))
    if isinstance(grade, str) and grade.strip().lstrip("-").isdigit() and grade.strip().isascii():
        grade = int(grade)
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in allowed:
        return None, f"model answer could not be read as a grade: {raw[:NOTE_CHARS]}"
    return grade, str(reason).strip()[:NOTE_CHARS]


# --------------------------------------------------------------------------- the client


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
        if not parts.path.rstrip("/").endswith("/chat/completions"):
            path = parts.path.rstrip("/") + "/chat/completions"
            url = urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        return cls(url=url, model=model, api_key=os.environ.get(API_KEY_ENV, ""), **kw)

    @property
    def display(self) -> str:
        """The URL as pages, the API and logs may show it: without user info, query string or fragment."""
        return endpoint_display(self.url)


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

    def __init__(self, stream: httpcore.NetworkStream):
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
        return _DeadlineStream(self._backend.connect_tcp(host, port, _left(timeout), local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class ChatClient:
    """Calls one endpoint from many threads over one httpx connection pool (``connections`` kept alive).

    Each attempt has a deadline for the whole exchange (``Endpoint.timeout``: connecting, sending and the
    whole answer), not only per read. The answer is read as a stream and abandoned past
    ``Endpoint.max_answer_bytes``, so that a huge answer costs the worker that much memory at most.
    """

    CHUNK = 16 * 1024

    def __init__(self, endpoint: Endpoint, *, connections: int = 8):
        self.endpoint = endpoint
        headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
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
                status, retry_after, payload = self._attempt(body)
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
            if status >= 400:
                raise ModelCallError(self._clean(f"HTTP {status}: {payload[:300].decode('utf-8', 'replace')}"))
            try:
                return json.loads(payload)["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                # A reply that is not a chat completion at all: the model's fault, not the network's.
                return payload.decode("utf-8", "replace")
        raise ModelCallError(f"gave up after {self.endpoint.retries + 1} attempts ({problem})")

    def _attempt(self, body: bytes) -> tuple[int, str | None, bytes]:
        """One request: (status, Retry-After, the answer's body), within the deadline and the size cap."""
        _deadline.at = time.monotonic() + self.endpoint.timeout
        try:
            with self._http.stream("POST", self._url, content=body, timeout=self.endpoint.timeout) as answer:
                return answer.status_code, answer.headers.get("Retry-After"), self._read(answer)
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
        """An error's text without the endpoint's query string or user info (httpx may quote the URL)."""
        text = text.replace(self.endpoint.url, self.endpoint.display)
        query = urlsplit(self.endpoint.url).query
        if query:
            text = text.replace(query, "...")
        return text

    def close(self) -> None:
        """Close the pool's connections (call once the calls are done)."""
        self._http.close()


# --------------------------------------------------------------------------- a run


@dataclass
class Verdict:
    pair_id: int
    grade: int | None  # None: unsure (the answer could not be read)
    note: str


@dataclass
class RunSummary:
    judge: str
    pairs: int = 0
    graded: int = 0
    unsure: int = 0
    failed: int = 0
    unchanged: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)  # the first few, for the report

    def lines(self) -> list[str]:
        rate = self.pairs / self.seconds if self.seconds else 0.0
        out = [
            f"{self.judge}: {self.pairs} pairs in {self.seconds:.1f} s ({rate:.0f} pairs/s): "
            f"{self.graded} graded, {self.unsure} unreadable answers stored as unsure, "
            f"{self.unchanged} unchanged, {self.failed} failed"
        ]
        out += [f"  failed: {e}" for e in self.errors]
        if self.failed:
            out.append("  failed pairs got no judgment: run again with --pairs unjudged to retry them")
        return out


def pairs_to_judge(*, campaign: Campaign, judge: Account, mode: str = "unjudged", seed: int = 0) -> list[int]:
    """Ids of the pooled pairs to send: ``unjudged`` (by this judge), ``all``, or ``sample:N`` (N pairs
    drawn at random, reproducibly with ``seed``)."""
    pooled = Pair.objects.filter(campaign=campaign, pooled=True).order_by("id")
    if mode == "all":
        return list(pooled.values_list("id", flat=True))
    if mode == "unjudged":
        done = set(Judgment.objects.filter(pair__campaign=campaign, annotator=judge).values_list("pair_id", flat=True))
        return [pid for pid in pooled.values_list("id", flat=True) if pid not in done]
    kind, _, n = mode.partition(":")
    if kind != "sample" or not (n.isascii() and n.isdigit()) or int(n) < 1:  # "sample:２" is no number here
        raise ValueError(f"--pairs must be one of {', '.join(PAIR_MODES)}, not {mode!r}")
    ids = list(pooled.values_list("id", flat=True))
    return sorted(random.Random(seed).sample(ids, min(int(n), len(ids))))


def _pair_texts(pair_ids: Sequence[int]) -> list[PairText]:
    rows = (
        Pair.objects.filter(id__in=pair_ids)
        .order_by("id")
        .values_list(
            "id",
            "query__qid",
            "query__text",
            "query__description",
            "document__docid",
            "document__title",
            "document__text",
        )
    )
    return [PairText(*row) for row in rows]


@transaction.atomic
def model_judgments_write(*, campaign: Campaign, judge: Account, verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """Store a model judge's verdicts as its judgments (history kept); returns (written, unchanged).

    Bulk writes: a run stores hundreds of verdicts at a time. The touched pairs' labels are refreshed,
    which leaves the human labels as they were but moves their queries' labels versions, so that the
    leaderboards scored with this judge's labels are rescored there.
    """
    grades = {g.value: g for g in campaign.grades.all()}
    current = {
        j.pair_id: j
        for j in Judgment.objects.filter(annotator=judge, pair_id__in=[v.pair_id for v in verdicts]).select_related(
            "grade"
        )
    }
    new, changed, revisions = [], [], []
    for v in verdicts:
        grade = grades.get(v.grade) if v.grade is not None else None
        j = current.get(v.pair_id)
        if j is None:
            new.append(Judgment(pair_id=v.pair_id, annotator=judge, grade=grade, unsure=grade is None, note=v.note))
            continue
        if (j.grade_id, j.unsure, j.note) == (grade.id if grade else None, grade is None, v.note):
            continue
        revisions.append(
            JudgmentRevision(
                judgment=j,
                changed_by=judge,
                old_grade=j.grade.value if j.grade else None,
                new_grade=grade.value if grade else None,
                old_unsure=j.unsure,
                new_unsure=grade is None,
                old_note=j.note,
                new_note=v.note,
            )
        )
        j.grade, j.unsure, j.tentative_grade, j.note = grade, grade is None, None, v.note
        j.updated_at = timezone.now()
        changed.append(j)
    Judgment.objects.bulk_create(new)
    if new and new[0].pk is None:  # backends that cannot return ids from bulk inserts
        ids = dict(
            Judgment.objects.filter(annotator=judge, pair_id__in=[j.pair_id for j in new]).values_list("pair_id", "id")
        )
        for j in new:
            j.pk = ids[j.pair_id]
    revisions.extend(
        JudgmentRevision(
            judgment=j,
            changed_by=judge,
            new_grade=j.grade.value if j.grade else None,
            new_unsure=j.unsure,
            new_note=j.note,
        )
        for j in new
    )
    Judgment.objects.bulk_update(changed, ["grade", "unsure", "tentative_grade", "note", "updated_at"])
    JudgmentRevision.objects.bulk_create(revisions)
    labels_refresh(campaign=campaign, pair_ids=[j.pair_id for j in new] + [j.pair_id for j in changed])
    return len(new) + len(changed), len(verdicts) - len(new) - len(changed)


class ModelJudgeAborted(Exception):
    """The endpoint failed ``give_up_after`` calls in a row: the run stopped. What was stored before stays."""

    def __init__(self, summary: RunSummary, last_error: str):
        self.summary, self.last_error = summary, last_error
        super().__init__(
            f"the model endpoint failed {summary.failed} call(s), the last ones in a row, and the run stopped "
            f"(last error: {last_error})"
        )


def model_judge_run(
    *,
    campaign: Campaign,
    judge: Account,
    endpoint: Endpoint,
    pair_ids: Sequence[int],
    concurrency: int = 8,
    batch: int = 256,
    progress: Callable[[int], None] | None = None,
    on_batch: Callable[[int, list[int], RunSummary], None] | None = None,
    give_up_after: int | None = None,
    client: ChatClient | None = None,
    on_failure: Callable[[str, str], None] | None = None,
) -> RunSummary:
    """Ask the endpoint to grade each pair, ``concurrency`` requests in flight, storing verdicts a batch at
    a time (an interrupted run keeps what it stored; ``--pairs unjudged`` resumes it).

    A failed call (after its retries) leaves the pair without a judgment and is counted; an answer that
    cannot be read becomes an unsure judgment with the raw answer in the note. ``progress(1)`` is called
    from the calling threads as each call ends. ``on_batch(n, failed_ids, summary)`` is called inside each
    batch's transaction, after its verdicts are stored: ``n`` pairs of ``pair_ids`` were consumed in order,
    ``failed_ids`` of them got no judgment (raise to roll the batch back). After ``give_up_after`` failed
    calls in a row nothing more is sent: the batches in flight are stored and ModelJudgeAborted is raised.
    ``on_failure(pair, reason)`` hears of each pair left without a judgment (the job logs it).
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    scale = list(campaign.grades.order_by("value").values_list("value", "name", "description"))
    values = [v for v, _, _ in scale]
    summary = RunSummary(judge=judge.username, pairs=len(pair_ids))
    own_client = client is None
    client = client or ChatClient(endpoint, connections=concurrency)
    started = time.perf_counter()
    stop = threading.Event()
    streak: dict[str, Any] = {"n": 0, "last": ""}
    streak_lock = threading.Lock()

    def ask(pair: PairText) -> Verdict | tuple[int, str | None]:
        if stop.is_set():
            return (pair.pair_id, None)  # not sent: the run is giving up
        try:
            answer = client.complete(prompt_messages(guidelines=campaign.guidelines, scale=scale, pair=pair))
        except ModelCallError as exc:
            with streak_lock:
                streak["n"] += 1
                streak["last"] = str(exc)
                if give_up_after and streak["n"] >= give_up_after:
                    stop.set()
            if on_failure:
                on_failure(f"qid {pair.qid} docid {pair.docid}", str(exc))
            return (pair.pair_id, f"qid {pair.qid} docid {pair.docid}: {exc}")
        finally:
            if progress:
                progress(1)
        with streak_lock:
            streak["n"] = 0
        grade, note = parse_answer(answer, values)
        return Verdict(pair.pair_id, grade, note)

    def finish(futures: list[Future[Verdict | tuple[int, str | None]]]) -> None:
        verdicts, failed_ids = [], []
        for future in futures:
            outcome = future.result()
            if isinstance(outcome, Verdict):
                verdicts.append(outcome)
                summary.graded += outcome.grade is not None
                summary.unsure += outcome.grade is None
                continue
            failed_ids.append(outcome[0])
            if outcome[1] is None:
                continue
            summary.failed += 1
            if len(summary.errors) < 5:
                summary.errors.append(outcome[1])
        with transaction.atomic():
            if verdicts:
                _, unchanged = model_judgments_write(campaign=campaign, judge=judge, verdicts=verdicts)
                summary.unchanged += unchanged
            if on_batch:
                on_batch(len(futures), failed_ids, summary)

    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="model-judge") as pool:
            # Two batches in flight: the workers call the next batch while this thread stores the last one.
            pending: list[Future[Verdict | tuple[int, str | None]]] = []
            for start in range(0, len(pair_ids), batch):
                if stop.is_set():
                    break
                futures = [pool.submit(ask, t) for t in _pair_texts(pair_ids[start : start + batch])]
                if pending:
                    finish(pending)
                pending = futures
            if pending:
                finish(pending)
    finally:
        if own_client:
            client.close()
    summary.seconds = time.perf_counter() - started
    # the endpoint as pages show it: no user info, query string or key
    logger.info(
        "model judge %s on campaign %s via %s (%s): %d pairs, %d graded, %d unsure, %d failed, %d unchanged in %.1f s",
        summary.judge,
        campaign.slug,
        endpoint.display,
        endpoint.model,
        summary.pairs,
        summary.graded,
        summary.unsure,
        summary.failed,
        summary.unchanged,
        summary.seconds,
    )
    if stop.is_set():
        logger.warning(
            "model judge %s on campaign %s stopped after %d failed calls in a row (last error: %s)",
            summary.judge,
            campaign.slug,
            streak["n"],
            streak["last"],
        )
        raise ModelJudgeAborted(summary, streak["last"])
    return summary
