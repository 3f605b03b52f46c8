"""Automatic judges: model annotators, their prompts, and storing their grades (the client that asks them is
judging.services.model_client).

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

import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import transaction
from django.utils import timezone

import metrics
from judging.endpoints import urls_display
from judging.imports.errors import FormatError
from judging.json_depth import json_loads
from judging.judge_models import answer_line
from judging.labels import labels_refresh
from judging.models import (
    AnnotatorProfile,
    Campaign,
    JudgeTemplate,
    Judgment,
    JudgmentRevision,
    ModelConsistency,
    Pair,
)
from judging.services.accounts import model_judge_membership
from judging.services.judge_templates import ScaleMapping, scale_mapping
from judging.services.model_client import ChatClient, Endpoint, ModelCallError
from judging.usernames import account_name_resolve

PAIR_MODES = ("unjudged", "all", "sample:N", "none")
REPEAT_MAX = 20  # times one pair may be asked in a run (--repeat)
DOC_CHARS = 6000  # of the document's text sent in the prompt: enough to judge, bounded cost per call
NOTE_CHARS = 2000  # of the model's reason kept in its judgment's note
ANSWER_EXCERPT_CHARS = 200  # of an answer that could not be read, kept in the note for a lead to inspect

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


def prompt_messages(
    *, guidelines: str, scale: Sequence[tuple[int, str, str]], pair: PairText, system: str | None = None
) -> list[dict[str, str]]:
    """Chat messages asking for one grade: the campaign's guidelines and scale as the system message (or
    ``system``, a judge's template with its answer line), the query (with its description of what counts
    as relevant) and the document as the user message."""
    if system is None:
        steps = "\n".join(f"{v} = {name}" + (f": {desc}" if desc else "") for v, name, desc in scale)
        system = (
            "You judge how relevant a document is to a search query, as a careful human assessor would.\n"
            f"Grades:\n{steps}\n"
            + (f"Guidelines:\n{guidelines.strip()}\n" if guidelines.strip() else "")
            + answer_line(None)
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
_GRADE_WORD = re.compile(r"\bgrade\b\W{0,3}(-?[0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def _answer_value(answer: str) -> tuple[object, str, str]:
    """(the grade as found, the reason, the raw answer) of a model's answer; see parse_answer."""
    raw = (answer or "").strip()
    text = _FENCE.sub("", raw).strip()
    grade: object = None
    reason: object = ""
    try:
        parsed = json_loads(text)
    except ValueError:  # not JSON, or nested too deep to parse (judging.json_depth)
        parsed = None
    if isinstance(parsed, dict):
        grade, reason = parsed.get("grade"), parsed.get("reason") or ""
    elif isinstance(parsed, int | float) and not isinstance(parsed, bool):
        grade = parsed
    else:
        found = _GRADE_WORD.search(text)
        if found:
            grade = float(found.group(1)) if "." in found.group(1) else int(found.group(1))
    if isinstance(grade, str) and _NUMBER.fullmatch(grade.strip()):
        grade = float(grade) if "." in grade else int(grade)
    return grade, str(reason).strip()[:NOTE_CHARS], raw


@dataclass(frozen=True)
class Reading:
    """One answer read: the campaign grade (None: unreadable, or off the model's scale), the note (the
    model's reason, or why it could not be used), and whether it was off the model's scale."""

    grade: int | None
    note: str
    off_scale: bool = False


def read_answer(answer: str, grades: Sequence[int], mapping: ScaleMapping | None) -> Reading:
    """An answer as a campaign grade: on the campaign's own scale (parse_answer), or on the model's scale
    through ``mapping``, where a number off the scale is flagged (the pair stays unjudged)."""
    if mapping is None:
        return Reading(*parse_answer(answer, grades))
    value, reason, raw = _answer_value(answer)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return Reading(None, f"model answer could not be read as a grade: {answer_excerpt(raw)}")
    grade = mapping.grade(value)
    if grade is None:
        return Reading(None, f"answer {value:g} is off the model's scale {mapping.low}-{mapping.high}", True)
    return Reading(grade, reason)


def answer_excerpt(raw: str) -> str:
    """The start of an answer that could not be read, as its note keeps it: ANSWER_EXCERPT_CHARS at most (the
    client has redacted secrets from it already: judging.services.model_client)."""
    raw = " ".join(raw.split())
    return raw if len(raw) <= ANSWER_EXCERPT_CHARS else raw[: ANSWER_EXCERPT_CHARS - 1] + "…"


def majority_grade(grades: Sequence[int | None]) -> int | None:
    """The grade most of a pair's repeated answers give (the lower one on a tie: no leniency by chance);
    None when no answer could be read."""
    counts = Counter(g for g in grades if g is not None)
    if not counts:
        return None
    top = max(counts.values())
    return min(g for g, c in counts.items() if c == top)


def parse_answer(answer: str, grades: Iterable[int]) -> tuple[int | None, str]:
    """The grade and reason in a model's answer, or (None, note) when it cannot be read.

    Accepted: a JSON object with "grade" (and an optional "reason"), possibly in a ```json fence; a bare
    grade ("2"); or text with "grade: 2" in it. Anything else, or a grade off the scale, comes back as
    None with the raw answer in the note, so that it is stored as an unsure judgment a lead can inspect.
    """
    allowed = set(grades)
    grade, reason, raw = _answer_value(answer)
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in allowed:
        return None, f"model answer could not be read as a grade: {answer_excerpt(raw)}"
    return grade, reason


# --------------------------------------------------------------------------- a run


@dataclass
class Verdict:
    pair_id: int
    grade: int | None  # None: unsure (the answer could not be read)
    note: str
    answers: list[int | None] | None = None  # the grades of the repeated answers (--repeat N)


@dataclass
class Failure:
    """A pair left without a judgment: ``reason`` None when it was never sent (the run gave up)."""

    pair_id: int
    reason: str | None
    off_scale: bool = False


@dataclass
class RunSummary:
    judge: str
    pairs: int = 0
    graded: int = 0
    unsure: int = 0
    failed: int = 0
    off_scale: int = 0  # answers off the model's scale: the pair is left unjudged
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
        if self.off_scale:
            out.append(f"  {self.off_scale} answers off the model's scale: those pairs were left unjudged")
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
    if mode == "none":  # only the canary (--canary)
        return []
    if mode == "unjudged":
        done = set(Judgment.objects.filter(pair__campaign=campaign, annotator=judge).values_list("pair_id", flat=True))
        return [pid for pid in pooled.values_list("id", flat=True) if pid not in done]
    kind, _, n = mode.partition(":")
    if kind != "sample" or not (n.isascii() and n.isdigit()) or int(n) < 1:  # "sample:２" is no number here
        raise ValueError(f"--pairs must be one of {', '.join(PAIR_MODES)}, not {mode!r}")
    ids = list(pooled.values_list("id", flat=True))
    return sorted(random.Random(seed).sample(ids, min(int(n), len(ids))))


def pair_texts(pair_ids: Sequence[int]) -> list[PairText]:
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
def model_judgments_write(
    *, campaign: Campaign, judge: Account, verdicts: Sequence[Verdict], template: JudgeTemplate | None = None
) -> tuple[int, int]:
    """Store a model judge's verdicts as its judgments (history kept); returns (written, unchanged).

    Each judgment records ``template``, the prompt version it was made with (an unchanged grade made
    with a new version is counted unchanged, and names the new version).

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
    new, changed, revisions, retemplated = [], [], [], []
    template_id = template.pk if template else None
    for v in verdicts:
        grade = grades.get(v.grade) if v.grade is not None else None
        j = current.get(v.pair_id)
        if j is None:
            new.append(
                Judgment(
                    pair_id=v.pair_id,
                    annotator=judge,
                    grade=grade,
                    unsure=grade is None,
                    note=v.note,
                    template_id=template_id,
                )
            )
            continue
        if (j.grade_id, j.unsure, j.note) == (grade.id if grade else None, grade is None, v.note):
            if j.template_id != template_id:
                j.template_id = template_id
                retemplated.append(j)
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
        j.template_id = template_id
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
    Judgment.objects.bulk_update(changed, ["grade", "unsure", "tentative_grade", "note", "updated_at", "template"])
    Judgment.objects.bulk_update(retemplated, ["template"])
    JudgmentRevision.objects.bulk_create(revisions)
    labels_refresh(campaign=campaign, pair_ids=[j.pair_id for j in new] + [j.pair_id for j in changed])
    return len(new) + len(changed), len(verdicts) - len(new) - len(changed)


def consistency_write(
    *, judge: Account, template: JudgeTemplate | None, verdicts: Sequence[Verdict], temperature: float
) -> None:
    """Store the repeated answers of each verdict that has them (the latest run replaces a pair's row)."""
    rows = [v for v in verdicts if v.answers and len(v.answers) >= 2]
    if not rows:
        return
    coded = np.array([[-1 if g is None else g for g in v.answers or []] for v in rows], dtype=np.int64)
    shares, unanimous = metrics.answer_agreement(coded)
    ModelConsistency.objects.filter(judge=judge, pair_id__in=[v.pair_id for v in rows]).delete()
    ModelConsistency.objects.bulk_create(
        ModelConsistency(
            pair_id=v.pair_id,
            judge=judge,
            template=template,
            answers=v.answers,
            repeats=len(v.answers or []),
            agreement=float(share),
            unanimous=bool(same),
            temperature=temperature,
        )
        for v, share, same in zip(rows, shares.tolist(), unanimous.tolist(), strict=True)
    )


class ModelJudgeAborted(Exception):
    """The endpoint failed ``give_up_after`` calls in a row: the run stopped. What was stored before stays."""

    def __init__(self, summary: RunSummary, last_error: str) -> None:
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
    template: JudgeTemplate | None = None,
    repeat: int = 1,
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

    ``template`` (a JudgeTemplate) is the system message sent, and each judgment records it; with a
    mapping, answers are read on the model's scale and one off the scale leaves the pair unjudged.
    ``repeat`` N >= 2 asks each pair N times (self-consistency): the judgment is the majority grade and
    the N grades are stored as the pair's ModelConsistency; any failed call leaves the pair unjudged.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if not 1 <= repeat <= REPEAT_MAX:
        raise ValueError(f"repeat must be from 1 to {REPEAT_MAX}")
    own_client = client is None
    run = _JudgeRun(
        campaign=campaign,
        judge=judge,
        endpoint=endpoint,
        client=client or ChatClient(endpoint, connections=concurrency),
        template=template,
        repeat=repeat,
        summary=RunSummary(judge=judge.username, pairs=len(pair_ids)),
        progress=progress,
        on_batch=on_batch,
        on_failure=on_failure,
        give_up_after=give_up_after,
    )
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="model-judge") as pool:
            # Two batches in flight: the workers call the next batch while this thread stores the last one.
            pending: list[Future[Verdict | Failure]] = []
            for start in range(0, len(pair_ids), batch):
                if run.stop.is_set():
                    break
                futures = [pool.submit(run.ask, t) for t in pair_texts(pair_ids[start : start + batch])]
                if pending:
                    run.finish(pending)
                pending = futures
            if pending:
                run.finish(pending)
    finally:
        if own_client:
            run.client.close()
    summary = run.summary
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
    if run.stop.is_set():
        logger.warning(
            "model judge %s on campaign %s stopped after %d failed calls in a row (last error: %s)",
            summary.judge,
            campaign.slug,
            run.streak,
            run.last_error,
        )
        raise ModelJudgeAborted(summary, run.last_error)
    return summary


class _JudgeRun:
    """One model_judge_run: asking the endpoint about a pair (on the pool's threads) and storing a batch of
    outcomes (on the calling thread), with the count of failed calls in a row that makes the run give up."""

    def __init__(
        self,
        *,
        campaign: Campaign,
        judge: Account,
        endpoint: Endpoint,
        client: ChatClient,
        template: JudgeTemplate | None,
        repeat: int,
        summary: RunSummary,
        progress: Callable[[int], None] | None,
        on_batch: Callable[[int, list[int], RunSummary], None] | None,
        on_failure: Callable[[str, str], None] | None,
        give_up_after: int | None,
    ) -> None:
        self.campaign, self.judge, self.endpoint, self.client = campaign, judge, endpoint, client
        self.template, self.repeat, self.summary = template, repeat, summary
        self.progress, self.on_batch, self.on_failure, self.give_up_after = (
            progress,
            on_batch,
            on_failure,
            give_up_after,
        )
        self.scale = list(campaign.grades.order_by("value").values_list("value", "name", "description"))
        self.values = [v for v, _, _ in self.scale]
        self.mapping = scale_mapping(template, self.values)
        self.system = template.text + answer_line(template) if template is not None else None
        self.stop = threading.Event()
        self.streak = 0  # failed calls in a row
        self.last_error = ""
        self.lock = threading.Lock()

    def ask(self, pair: PairText) -> Verdict | Failure:
        """The pair's verdict from ``repeat`` answers, or why it has none."""
        if self.stop.is_set():
            return Failure(pair.pair_id, None)  # not sent: the run is giving up
        where = f"qid {pair.qid} docid {pair.docid}"
        messages = prompt_messages(guidelines=self.campaign.guidelines, scale=self.scale, pair=pair, system=self.system)
        readings: list[Reading] = []
        try:
            for _ in range(self.repeat):
                try:
                    answer = self.client.complete(messages)
                except ModelCallError as exc:
                    self._failed_call(str(exc))
                    if self.on_failure:
                        self.on_failure(where, str(exc))
                    return Failure(pair.pair_id, f"{where}: {exc}")
                with self.lock:
                    self.streak = 0
                readings.append(read_answer(answer, self.values, self.mapping))
        finally:
            if self.progress:
                self.progress(1)
        off = next((r for r in readings if r.off_scale), None)
        if off is not None:
            if self.on_failure:
                self.on_failure(where, off.note)
            return Failure(pair.pair_id, f"{where}: {off.note}", off_scale=True)
        if self.repeat == 1:
            return Verdict(pair.pair_id, readings[0].grade, readings[0].note)
        grades = [r.grade for r in readings]
        grade = majority_grade(grades)
        note = next(r.note for r in readings if r.grade == grade)
        return Verdict(pair.pair_id, grade, note, answers=grades)

    def _failed_call(self, error: str) -> None:
        with self.lock:
            self.streak += 1
            self.last_error = error
            if self.give_up_after and self.streak >= self.give_up_after:
                self.stop.set()

    def finish(self, futures: list[Future[Verdict | Failure]]) -> None:
        """Store a batch's verdicts in one transaction (with the repeated answers when asked several times) and
        count its outcomes; ``on_batch`` inside the transaction."""
        summary = self.summary
        verdicts, failed_ids = [], []
        for future in futures:
            outcome = future.result()
            if isinstance(outcome, Verdict):
                verdicts.append(outcome)
                summary.graded += outcome.grade is not None
                summary.unsure += outcome.grade is None
                continue
            failed_ids.append(outcome.pair_id)
            if outcome.reason is None:
                continue
            if outcome.off_scale:
                summary.off_scale += 1
            else:
                summary.failed += 1
            if len(summary.errors) < 5:
                summary.errors.append(outcome.reason)
        with transaction.atomic():
            if verdicts:
                _, unchanged = model_judgments_write(
                    campaign=self.campaign, judge=self.judge, verdicts=verdicts, template=self.template
                )
                summary.unchanged += unchanged
                if self.repeat > 1:
                    consistency_write(
                        judge=self.judge,
                        template=self.template,
                        verdicts=verdicts,
                        temperature=self.endpoint.temperature,
                    )
            if self.on_batch:
                self.on_batch(len(futures), failed_ids, summary)
