"""The demo's online figures and its automatic judge: a term-overlap model, deterministic and written for the demo.

Online figures are made the way an A/B test would report them, from what shoppers would see: each system's CTR
per query follows the hidden relevance of its top 5 (position-discounted), with a little seeded noise. The
conversion rate follows the top 3 and rewards a cheap exact match, which the dense system tends to miss: it
wins on CTR but loses to bm25 on conversion, one discordance that makes the "Offline vs online" page worth
reading.

The model judge grades a pair by how many of the query's words appear in the listing (title and text). It is
lenient on listings that repeat the query's words without being what was asked for, and strict on good listings
worded differently: the kind of judge whose calibration a lead should look at before trusting it.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable

from judging.imports.parse import parse_run

JUDGE = "term-overlap"
JUDGE_DESCRIPTION = (
    "Demo model: grade 2 when every query word appears in the listing and most in its title, 1 when half of "
    "them do, else 0 (no network call; judging/demo/online.py)"
)
STOPWORDS = frozenset(["a", "an", "and", "for", "in", "of", "on", "the", "to", "with", "under", "over", "s"])
_WORD = re.compile(r"[0-9a-z]+")
# Per-system behaviour an A/B test would show beyond relevance: the dense model (and the Korean demo's hybrid one)
# surfaces pricier items.
CONVERSION_FACTOR = {"bm25": 1.0, "dense-v2": 0.8, "random-baseline": 1.0, "hybrid-v3": 0.9}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


def overlap_grade(query: str, title: str, text: str) -> tuple[int, str]:
    """The demo judge's grade and reason for one pair: term overlap between the query and the listing."""
    want = _words(query)
    if not want:
        return 0, "the query has no content words"
    body = _words(f"{title} {text}")
    found = want & body
    in_title = want & _words(title)
    share = len(found) / len(want)
    missing = ", ".join(sorted(want - found))
    reason = f"{len(found)} of {len(want)} query words in the listing" + (f" (missing: {missing})" if missing else "")
    if share == 1 and len(in_title) * 2 >= len(want):
        return 2, reason
    if share >= 0.5:
        return 1, reason
    return 0, reason


JUDGE_KO = "term-overlap-ko"
JUDGE_KO_DESCRIPTION = (
    "Demo model for Korean: a query word counts as found when it appears anywhere in the listing, inside a longer "
    "word too (Korean attaches particles and writes compounds without spaces: 패딩 is found in 롱패딩을); grades as "
    "term-overlap does (no network call; judging/demo/online.py)"
)


def overlap_grade_ko(query: str, title: str, text: str) -> tuple[int, str]:
    """The Korean demo judge's grade and reason: the share of the query's words found in the listing."""
    want = sorted(set(unicodedata.normalize("NFC", query).lower().split()))
    if not want:
        return 0, "질의에 단어가 없습니다"
    title = unicodedata.normalize("NFC", title).lower()
    body = f"{title} {unicodedata.normalize('NFC', text).lower()}"
    found = [w for w in want if w in body]
    in_title = [w for w in want if w in title]
    missing = [w for w in want if w not in body]
    reason = f"질의어 {len(want)}개 중 {len(found)}개가 상품 정보에 있음" + (
        f" (없음: {', '.join(missing)})" if missing else ""
    )
    if len(found) == len(want) and len(in_title) * 2 >= len(want):
        return 2, reason
    if len(found) * 2 >= len(want):
        return 1, reason
    return 0, reason


def model_judge(lang: str) -> tuple[str, str, Callable[[str, str, str], tuple[int, str]]]:
    """(name, description, grade function) of the demo's automatic judge in that language."""
    if lang == "ko":
        return JUDGE_KO, JUDGE_KO_DESCRIPTION, overlap_grade_ko
    return JUDGE, JUDGE_DESCRIPTION, overlap_grade


def online_csv(runs: dict[str, str], truth: dict, seed: int) -> bytes:
    """CSV of each system's CTR and conversion rate, campaign-wide (with 95% intervals) and per query (CTR)."""
    rng = random.Random(seed + 15)
    rows = ["system,metric,value,ci_low,ci_high,qid"]
    for system in sorted(runs):
        rankings = parse_run(runs[system].encode(), filename=f"{system}.run")
        ctrs, conversions = [], []
        for ranking in next(iter(rankings.values())):
            grades = [truth[(ranking.qid, d)].grade if (ranking.qid, d) in truth else 0 for d in ranking.docids]
            seen = sum(g / (i + 1) for i, g in enumerate(grades[:5])) / sum(2 / (i + 1) for i in range(5))
            top = sum(g == 2 for g in grades[:3]) / 3
            ctr = min(0.9, 0.04 + 0.55 * seen + rng.uniform(-0.02, 0.02))
            conv = max(0.0, 0.004 + 0.06 * top * CONVERSION_FACTOR.get(system, 1.0) + rng.uniform(-0.003, 0.003))
            ctrs.append(ctr)
            conversions.append(conv)
            rows.append(f"{system},ctr,{ctr:.4f},,,{ranking.qid}")
        for metric, values in (("ctr", ctrs), ("conversion", conversions)):
            mean = sum(values) / len(values)
            half = 1.96 * (sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1) / len(values)) ** 0.5
            rows.append(f"{system},{metric},{mean:.5f},{max(mean - half, 0):.5f},{mean + half:.5f},")
    return ("\n".join(rows) + "\n").encode()
