"""The query-word-stuffing canary (``judge_with_model --canary N``): does the judge's grade rise when a
document people found not relevant has the query's words written into it?

Alaofi et al. (2024) show that language-model judges grade such documents up: "LLMs can be fooled into
labelling a document as relevant" (SIGIR-AP 2024). The canary takes N pooled pairs whose human label is
the campaign's lowest grade, asks the judge about each document as it is and with the query's words
inserted (at the start, the middle and the end of the text the prompt shows), and stores both grades as a
CanaryProbe. The stuffed text lives only in the prompt: no document, pair, judgment or label is written
for it, so it never enters the pool or a leaderboard.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from django.contrib.auth.models import User as Account
from django.db import transaction

from judging.judge_models import answer_line
from judging.models import Campaign, CanaryProbe, JudgeTemplate, Pair
from judging.services.judge_templates import scale_mapping
from judging.services.model_client import ChatClient, Endpoint, ModelCallError
from judging.services.model_judge import DOC_CHARS, PairText, pair_texts, prompt_messages, read_answer

logger = logging.getLogger(__name__)

CANARY_DEFAULT = 10
CANARY_MAX = 200
_WORD = re.compile(r"\w+")


def query_words(query: str) -> str:
    """The query's distinct words, in order (case kept), joined by spaces."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(query):
        seen.setdefault(w, None)
    return " ".join(seen)


def stuffed_text(text: str, words: str) -> str:
    """``text`` with ``words`` inserted at its start, near its middle (at a space) and at its end, all within
    the part of the text the prompt shows (DOC_CHARS)."""
    if not words:
        return text
    head = text[: max(0, DOC_CHARS - 3 * (len(words) + 2))]
    middle = head.rfind(" ", 0, len(head) // 2 + 1)
    cut = middle if middle > 0 else len(head) // 2
    return f"{words}. {head[:cut]} {words} {head[cut:]} {words}."


def canary_pairs(*, campaign: Campaign, n: int, seed: int = 0) -> list[int]:
    """Ids of up to ``n`` pooled pairs whose human label is the campaign's lowest grade, drawn at random
    (reproducibly with ``seed``)."""
    lowest = campaign.grades.order_by("value").values_list("value", flat=True).first()
    if lowest is None:
        return []
    ids = list(
        Pair.objects.filter(campaign=campaign, pooled=True, label=lowest).order_by("id").values_list("id", flat=True)
    )
    return sorted(random.Random(seed).sample(ids, min(n, len(ids))))


def canary_run(
    *,
    campaign: Campaign,
    judge: Account,
    endpoint: Endpoint,
    template: JudgeTemplate | None,
    n: int = CANARY_DEFAULT,
    seed: int = 0,
    concurrency: int = 4,
    client: ChatClient | None = None,
    on_failure: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """Ask the judge about ``n`` known non-relevant documents, as they are and stuffed with the query's
    words; store the probes (replacing this judge's earlier probe of the same pair) and return the tally:
    ``probes`` asked, ``compared`` (both answers read), ``could_rise`` (of those, the ones whose original grade
    was below the top one: a grade already at the top cannot rise), ``rose`` (stuffed grade above the original one),
    ``failed`` (a call failed or an answer was off the model's scale: no probe stored)."""
    if not 1 <= n <= CANARY_MAX:
        raise ValueError(f"the canary takes 1 to {CANARY_MAX} documents")
    scale = list(campaign.grades.order_by("value").values_list("value", "name", "description"))
    values = [v for v, _, _ in scale]
    mapping = scale_mapping(template, values)
    system = template.text + answer_line(template) if template is not None else None
    texts = pair_texts(canary_pairs(campaign=campaign, n=n, seed=seed))
    own = client is None
    client = client or ChatClient(endpoint, connections=concurrency)

    def grade_of(pair: PairText) -> tuple[int | None, str | None]:
        try:
            answer = client.complete(
                prompt_messages(guidelines=campaign.guidelines, scale=scale, pair=pair, system=system)
            )
        except ModelCallError as exc:
            return None, str(exc)
        reading = read_answer(answer, values, mapping)
        return reading.grade, reading.note if reading.off_scale else None

    def probe(pair: PairText) -> CanaryProbe | str:
        stuffed = replace(pair, text=stuffed_text(pair.text[:DOC_CHARS], query_words(pair.query)))
        (before, problem), (after, problem2) = grade_of(pair), grade_of(stuffed)
        if problem or problem2:
            return f"canary qid {pair.qid} docid {pair.docid}: {problem or problem2}"
        return CanaryProbe(
            pair_id=pair.pair_id, judge=judge, template=template, original_grade=before, stuffed_grade=after
        )

    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="model-canary") as pool:
            outcomes = list(pool.map(probe, texts))
    finally:
        if own:
            client.close()
    probes = [o for o in outcomes if isinstance(o, CanaryProbe)]
    problems = [o for o in outcomes if isinstance(o, str)]
    for p in problems:
        if on_failure:
            on_failure("canary", p)
    with transaction.atomic():
        CanaryProbe.objects.filter(judge=judge, pair_id__in=[p.pair_id for p in probes]).delete()
        CanaryProbe.objects.bulk_create(probes)
    compared = [
        (p.original_grade, p.stuffed_grade)
        for p in probes
        if p.original_grade is not None and p.stuffed_grade is not None
    ]
    rose = sum(1 for before, after in compared if after > before)
    could_rise = sum(1 for before, _after in compared if before < values[-1])
    logger.info(
        "canary of judge %s on %s: grade rose on %d of %d stuffed documents that could rise (%d already at the top "
        "grade, %d failed)",
        judge.get_username(),
        campaign.slug,
        rose,
        could_rise,
        len(compared) - could_rise,
        len(problems),
    )
    return {
        "probes": len(texts),
        "compared": len(compared),
        "could_rise": could_rise,
        "rose": rose,
        "failed": len(problems),
    }
