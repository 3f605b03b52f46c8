"""Loads a demo campaign (English ``shop`` or Korean ``shopping-ko``) through the real importers and services
(``load_demo [--lang ko]``)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import ModuleType

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.db import transaction
from django.utils import timezone

from judging.demo import catalogue, catalogue_ko
from judging.demo.generator import Clock, Decision, DemoData, decide
from judging.demo.online import model_judge, online_csv
from judging.models import (
    Adjudication,
    Campaign,
    Judgment,
    JudgmentRevision,
    Membership,
    Pair,
    System,
)
from judging.services import (
    adjudication_set,
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    queries_import,
    run_import,
)
from judging.services.languages import user_language_set
from judging.services.model_judge import Verdict as ModelVerdict
from judging.services.model_judge import model_judge_get_or_create, model_judgments_write
from judging.services.online import online_import

# A catalogue is a language's vocabulary, a module with the same names: SLUG, NAME, SCALE, GUIDELINES, QUERIES,
# SYSTEMS, LEAD, ANNOTATORS, PASSWORDS, ROLES, PROFILES, PLAN, LANGUAGE, WORDS, VOCABULARY, demo_data() ...
# (judging/demo/catalogue.py is the reference); judging/demo/generator.py makes its demo.
CATALOGUES = {"en": catalogue, "ko": catalogue_ko}

# (judgment id, when) of every change the demo's annotators make, in order: the judging, then the backdating.
Events = list[tuple[int, datetime]]


def demo_catalogue(lang: str = "en") -> ModuleType:
    """The demo catalogue of a language ("en" or "ko")."""
    try:
        return CATALOGUES[lang]
    except KeyError:
        raise ValueError(f"no demo in language {lang!r} (choose from {', '.join(CATALOGUES)})") from None


@dataclass
class DemoSummary:
    created: bool
    seconds: float = 0.0
    users_created: list[str] = field(default_factory=list)
    queries: int = 0
    documents: int = 0
    systems: list[str] = field(default_factory=list)
    pairs: int = 0
    labelled: int = 0
    judgments: dict[str, int] = field(default_factory=dict)
    unsure: int = 0
    unsure_by: dict[str, int] = field(default_factory=dict)  # per annotator, beside their judgments
    adjudicated: int = 0
    log: list[str] = field(default_factory=list)


def demo_users(*, reset: bool, cat: ModuleType = catalogue) -> tuple[dict, list[str]]:
    User = get_user_model()
    users, created = {}, []
    for username, password in cat.PASSWORDS.items():
        user = User.objects.filter(username=username).first()
        if user is None:
            # Only the admin user opens the admin site (superusers only): the lead leads its campaigns in the
            # app, where access is per campaign, not site-wide.
            extra = {"is_staff": username == "admin", "is_superuser": username == "admin"}
            user = User.objects.create_user(
                username=username, password=password, email=f"{username}@shop.example", **extra
            )
            created.append(username)
        elif reset:
            user.set_password(password)
            user.is_active = True
            # A demo loaded by an older version made the lead staff with every judging permission.
            user.is_staff = user.is_superuser = username == "admin"
            user.save(update_fields=["password", "is_active", "is_staff", "is_superuser"])
            if username == cat.LEAD:
                user.user_permissions.clear()
        if username in (cat.LEAD, *cat.ANNOTATORS) and (username in created or reset):
            user_language_set(user=user, language=cat.LANGUAGE)
        users[username] = user
    return users, created


def _judge(cat: ModuleType, campaign: Campaign, users: dict, data: DemoData, start: datetime) -> Events:
    """The three annotators (Alice, Bob and Carol in English) judge part of the pool; return (judgment id, when)
    for every change, in order."""
    rng = random.Random(cat.SEED + 1)
    by_query: dict[str, list[Pair]] = {}
    for pair in (
        Pair.objects.filter(campaign=campaign, pooled=True)
        .select_related("query", "document", "campaign")
        # by qid and docid, not by id: pair ids are shuffled on purpose (they must not reveal which system
        # found a pair), and the demo must come out the same every time
        .order_by("query__qid", "document__docid")
    ):
        by_query.setdefault(pair.query.qid, []).append(pair)
    needs = {q.qid: q for q in cat.QUERIES}
    products = {p.docid: p for p in data.products}
    # Campaign progress as a lead would find it a few days in: some queries done twice over, some by one
    # annotator so far, one in progress, the rest untouched (plenty left for whoever logs in next).
    first, second, third = cat.ANNOTATORS
    plan: dict[str, list[Pair]] = {first: [], second: [], third: []}
    for qid in cat.PLAN["both"]:
        plan[first] += by_query[qid]
        plan[second] += by_query[qid]
    for qid in cat.PLAN["both"][:5]:  # the overlap sample everyone judges, for agreement figures
        plan[third] += by_query[qid][::3]
    for qid in cat.PLAN["first_more"]:
        plan[first] += by_query[qid]
        plan[second] += by_query[qid][: len(by_query[qid]) // 3]
    for qid in cat.PLAN["second_only"]:
        plan[second] += by_query[qid]
    for qid in cat.PLAN["started"]:
        plan[first] += by_query[qid][: len(by_query[qid]) // 3]

    clocks = {
        first: Clock(rng, start.replace(hour=9, minute=12)),
        second: Clock(rng, start.replace(hour=10, minute=41)),
        third: Clock(rng, (start + timedelta(days=1)).replace(hour=14, minute=5)),
    }
    events: Events = []
    decided: dict[tuple[str, int], Decision] = {}
    for name in cat.ANNOTATORS:
        for pair in plan[name]:
            verdict = data.truth[pair.query.qid, pair.document.docid]
            need, product = needs[pair.query.qid], products[pair.document.docid]
            d = decide(rng, cat.PROFILES[name], need, product, verdict, cat.WORDS)
            judgment, changed = judgment_record(
                pair=pair,
                annotator=users[name],
                grade=d.grade,
                unsure=d.unsure,
                tentative_grade=d.tentative,
                note=d.note,
                seconds_spent=d.seconds,
            )
            decided[name, pair.id] = d
            if changed:
                events.append((judgment.id, clocks[name].tick(d.seconds)))
    # A second look the next morning: the first annotator settles some of their unsure pairs and corrects two
    # grades, so that the history shows judgments that changed.
    alice_pairs = {p.id: p for p in plan[first]}
    settles = {d.settled_by: pid for (name, pid), d in reversed(decided.items()) if name == first and d.unsure}
    unsure = sorted(settles.values(), key=lambda pid: (alice_pairs[pid].query.qid, alice_pairs[pid].document.docid))[
        :2
    ]  # one of each kind of doubt where there are several
    wrong = [
        pid
        for (name, pid), d in decided.items()
        if name == first
        and not d.unsure
        and d.grade != data.truth[alice_pairs[pid].query.qid, alice_pairs[pid].document.docid].grade
    ][:2]
    clocks[first].next_morning()
    for pid in unsure + wrong:
        pair = alice_pairs[pid]
        truth = data.truth[pair.query.qid, pair.document.docid]
        note = decided[first, pid].settled_by or cat.RECHECK_NOTE
        seconds = round(rng.uniform(8, 30), 1)
        judgment, changed = judgment_record(
            pair=pair, annotator=users[first], grade=truth.grade, note=note, seconds_spent=seconds
        )
        if changed:
            events.append((judgment.id, clocks[first].tick(seconds)))
    return events


def _adjudicate(cat: ModuleType, campaign: Campaign, lead: Account, data: DemoData) -> list[int]:
    """The lead settles the two most disputed pairs (grades furthest apart), leaving the rest for the queue."""
    grades: dict[int, list[int]] = {}
    names: dict[int, tuple[str, str]] = {}  # ties broken by qid and docid: pair ids are shuffled on purpose
    for pair_id, value, qid, docid in Judgment.objects.filter(pair__campaign=campaign, unsure=False).values_list(
        "pair_id", "grade__value", "pair__query__qid", "pair__document__docid"
    ):
        grades.setdefault(pair_id, []).append(value)
        names[pair_id] = (qid, docid)
    disputed = sorted(
        ((max(v) - min(v), pid) for pid, v in grades.items() if len(v) > 1 and max(v) != min(v)),
        key=lambda x: (-x[0], names[x[1]]),
    )
    done = []
    for _, pair_id in disputed[:2]:
        pair = Pair.objects.select_related("query", "document", "campaign").get(id=pair_id)
        truth = data.truth[pair.query.qid, pair.document.docid]
        adjudication_set(pair=pair, lead=lead, grade=truth.grade, note=cat.adjudication_note(truth.misses, truth.grade))
        done.append(pair_id)
    return done


def _backdate(
    campaign: Campaign, users: dict, created: list[str], events: Events, adjudicated: list[int], start: datetime
) -> None:
    """Spread the timestamps over the past days, as if the campaign had been running for a while."""
    setup = start.replace(hour=8, minute=5)  # the lead set the campaign up before the annotators came in
    Campaign.objects.filter(id=campaign.id).update(created_at=setup)
    System.objects.filter(campaign=campaign).update(imported_at=setup + timedelta(minutes=5))
    Pair.objects.filter(campaign=campaign).update(created_at=setup + timedelta(minutes=5))
    Membership.objects.filter(campaign=campaign).update(created_at=setup + timedelta(minutes=1))
    get_user_model().objects.filter(username__in=created).update(date_joined=setup - timedelta(hours=1))
    times: dict[int, list[datetime]] = {}
    for judgment_id, when in events:
        times.setdefault(judgment_id, []).append(when)
    judgments = list(Judgment.objects.filter(id__in=times))
    for j in judgments:
        j.created_at, j.updated_at = times[j.id][0], times[j.id][-1]
    Judgment.objects.bulk_update(judgments, ["created_at", "updated_at"], batch_size=1000)
    revisions = list(JudgmentRevision.objects.filter(judgment__in=judgments).order_by("judgment_id", "id"))
    seen: Counter = Counter()
    for r in revisions:
        r.changed_at = times[r.judgment_id][min(seen[r.judgment_id], len(times[r.judgment_id]) - 1)]
        seen[r.judgment_id] += 1
    JudgmentRevision.objects.bulk_update(revisions, ["changed_at"], batch_size=1000)
    last = max((when for _, when in events), default=start)
    for minutes, pair_id in enumerate(adjudicated, 1):
        Adjudication.objects.filter(pair_id=pair_id).update(decided_at=last + timedelta(minutes=15 + 4 * minutes))


def _model_judge_and_online(cat: ModuleType, campaign: Campaign, data: DemoData) -> list[str]:
    """The demo's automatic judge grades every pooled pair (stored the way judge_with_model stores a model's
    answers), and the systems' online figures are imported like a lead's CSV."""
    name, description, overlap_grade = model_judge("ko" if cat is catalogue_ko else "en")
    judge = model_judge_get_or_create(name=name, description=description, campaign=campaign)
    rows = Pair.objects.filter(campaign=campaign, pooled=True).values_list(
        "id", "query__text", "document__title", "document__text"
    )
    verdicts = [ModelVerdict(pid, *overlap_grade(q, title, text)) for pid, q, title, text in rows.order_by("id")]
    written, _ = model_judgments_write(campaign=campaign, judge=judge, verdicts=verdicts)
    online = online_import(
        campaign=campaign, data=online_csv(data.runs, data.truth, cat.SEED), filename=f"{cat.FILE_STEM}-online.csv"
    )
    return [f"model judge {name}: {written} pairs graded", *online.lines()[:1]]


def _count(summary: DemoSummary, campaign: Campaign) -> DemoSummary:
    summary.queries = campaign.queries.count()
    summary.documents = campaign.documents.count()
    summary.systems = list(campaign.systems.values_list("name", flat=True))
    summary.pairs = campaign.pairs.filter(pooled=True).count()
    summary.labelled = campaign.pairs.filter(label__isnull=False).count()
    summary.adjudicated = campaign.pairs.filter(adjudicated=True).count()
    judgments = Judgment.objects.filter(pair__campaign=campaign)
    counts = Counter(judgments.values_list("annotator__username", flat=True))
    summary.judgments = {name: counts[name] for name in sorted(counts)}
    unsure = Counter(judgments.filter(unsure=True).values_list("annotator__username", flat=True))
    summary.unsure_by = {name: unsure[name] for name in summary.judgments}
    summary.unsure = sum(unsure.values())
    return summary


def demo_load(*, reset: bool = False, lang: str = "en") -> DemoSummary:
    """Create the demo users and the demo campaign of ``lang`` (``shop`` in English, ``shopping-ko`` in Korean)
    unless it exists; ``reset`` deletes and rebuilds it.

    Everything goes through the services a lead's files go through (queries_import, documents_import, run_import,
    judgment_record, adjudication_set), in one transaction: a failure leaves nothing half built.
    """
    cat = demo_catalogue(lang)
    began = timezone.now()
    with transaction.atomic():
        if reset:
            Campaign.objects.filter(slug=cat.SLUG).delete()
        users, created_users = demo_users(reset=reset, cat=cat)
        campaign = Campaign.objects.filter(slug=cat.SLUG).first()
        if campaign is not None:
            for name in cat.ANNOTATORS:
                membership_add(campaign=campaign, user=users[name], role=Membership.Role.ANNOTATOR)
            membership_add(campaign=campaign, user=users[cat.LEAD], role=Membership.Role.LEAD)
            summary = DemoSummary(created=False, users_created=created_users)
            return _count(summary, campaign)

        data = cat.demo_data()
        summary = DemoSummary(created=True, users_created=created_users)
        campaign = campaign_create(
            slug=cat.SLUG,
            name=cat.NAME,
            scale=cat.SCALE,
            pool_depth=10,
            redundancy=2,
            guidelines=cat.GUIDELINES,
            description=cat.DESCRIPTION,
            lead=users[cat.LEAD],
        )
        for name in cat.ANNOTATORS:
            membership_add(campaign=campaign, user=users[name], role=Membership.Role.ANNOTATOR)
        imports = [
            queries_import(campaign=campaign, data=data.topics_tsv(), filename=f"{cat.FILE_STEM}-topics.tsv"),
            documents_import(campaign=campaign, data=data.docs_jsonl(), filename=f"{cat.FILE_STEM}-products.jsonl"),
        ]
        imports += [
            run_import(campaign=campaign, data=data.runs[name].encode(), filename=f"{name}.run") for name in cat.SYSTEMS
        ]
        for s in imports:  # topics and documents never add pairs: leave that line to the runs
            summary.log.extend(line for line in s.lines() if s.kind == "rankings" or "pool" not in line)
        start = (began - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
        events = _judge(cat, campaign, users, data, start)
        adjudicated = _adjudicate(cat, campaign, users[cat.LEAD], data)
        _backdate(campaign, users, created_users, events, adjudicated, start)
        summary.log.extend(_model_judge_and_online(cat, campaign, data))
        _count(summary, campaign)
    summary.seconds = (timezone.now() - began).total_seconds()
    return summary
