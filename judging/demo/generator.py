"""The demo generator, written once for every language: from a catalogue's vocabulary (its queries, the words of
its listings, its rankers) to products, their hidden relevance, the systems' runs and how each simulated annotator
judges. The vocabularies are judging/demo/catalogue.py (English) and judging/demo/catalogue_ko.py (Korean): data,
and the few functions that put a language's words together (a listing's title and page, a query's department).
Nothing here is random at import time and nothing calls the network: the same seed gives the same demo, byte for
byte.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Trait:
    """A material or a feature: the word a title uses for it ("" when titles leave it out) and what pages say."""

    word: str
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class Need:
    """A query and, hidden from the annotators, what makes a listing relevant to it."""

    qid: str
    text: str
    description: str
    kinds: frozenset[str]
    related: frozenset[str] = frozenset()
    materials: frozenset[str] = frozenset()
    near_materials: frozenset[str] | None = None  # if set, other materials miss twice (not relevant)
    audiences: frozenset[str] = frozenset()
    features: frozenset[str] = frozenset()
    near_features: frozenset[str] | None = None
    colours: frozenset[str] = frozenset()


def need(qid: str, text: str, description: str, kinds: str, **constraints: str) -> Need:
    """A query and its hidden requirements, each a space-separated set: ``need("q01", "wool knit sweater",
    "...", "sweater", related="cardigan", materials="merino lambswool")``."""
    sets = {key: frozenset(value.split()) for key, value in constraints.items()}
    return Need(qid, text, description, frozenset(kinds.split()), **sets)


@dataclass(frozen=True)
class Spec:
    """A product before it has an id and words."""

    kind: str
    audience: str
    material: str
    colour: str
    features: frozenset[str]


@dataclass(frozen=True)
class Product:
    docid: str
    kind: str
    audience: str
    material: str
    colour: str
    features: frozenset[str]
    title: str
    text: str
    url: str = ""
    colour_family: str = ""  # the family of its colour a query can ask for ("" when it has none)


@dataclass(frozen=True)
class Verdict:
    grade: int
    misses: tuple[str, ...] = ()
    unclear: str = ""  # what the listing does not say, when that decides the grade
    on_topic: bool = False  # the right kind of product or a close substitute


def relevance(need: Need, product: Product) -> Verdict:
    """The grade a careful annotator with the full product sheet would give (never shown in the app)."""
    if product.kind in need.kinds:
        top = 2
    elif product.kind in need.related:
        top = 1
    else:
        return Verdict(0)
    misses: list[str] = []
    unclear = ""
    if need.audiences and product.audience not in need.audiences:
        if product.audience == "unspecified":
            misses.append("audience")
            unclear = "audience"
        elif ("kids" in need.audiences) != (product.audience == "kids"):
            misses += ["audience", "audience"]  # kids' things for an adult query, and the reverse
        else:
            misses.append("audience")
    if need.materials and product.material not in need.materials:
        near = need.near_materials
        misses += ["material"] * (1 if near is None or product.material in near else 2)
    for f in need.features:
        if f not in product.features:
            near = need.near_features
            misses += ["feature"] * (1 if near is None or near & product.features else 2)
    if need.colours and product.colour_family not in need.colours:
        misses.append("colour")
    grade = max(0, top - len(misses))
    if unclear and grade == max(0, top - len(misses) + 1):
        unclear = ""  # the grade is the same whoever the listing is for
    if top == 1:
        misses.insert(0, "kind")
    return Verdict(grade, tuple(misses), unclear, on_topic=True)


def bm25(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each tokenized document for the query's tokens (every catalogue's lexical systems)."""
    avg = sum(map(len, docs)) / len(docs)
    df = Counter(t for d in docs for t in set(d))
    n = len(docs)
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in set(query):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append(s)
    return scores


Scorer = Callable[[random.Random, Need, list[Product], list[Verdict], list[float], list[float]], dict[str, list[float]]]


@dataclass(frozen=True)
class Vocabulary:
    """What a language's demo is made of. The generator (:func:`generate`) reads it; a catalogue module gives
    one, with its data (queries, kinds, colours ...) and the functions that write in its language."""

    queries: tuple[Need, ...]
    kinds: Collection[str]  # the product kinds; filler listings pick one at random
    colours: Mapping[str, str]  # a colour's name in a listing -> its family
    listings: int  # generated listings before the imported and re-posted ones are added
    numbers: range  # the product numbers are drawn from it
    docid: str  # "p{number}"
    url: str  # "https://shop.example/p/{number}"
    imported: tuple[tuple[Spec, str, str], ...]  # listings brought in with their markup: (spec, title, text)
    spec: Callable[[random.Random, str], Spec]  # a listing of a kind, at random
    variants: Callable[[random.Random, Need], list[Spec]]  # the listings written to sit near a query
    words: Callable[[random.Random, Spec], tuple[str, str]]  # a listing's title and page
    tokens: Callable[[str], list[str]]  # what the lexical rankers index
    scores: Scorer  # (rng, need, products, verdicts, lexical scores, popularity) -> system -> scores
    tiers: tuple[tuple[str, int], ...]  # query traffic tiers: (name, last query number)
    department: Callable[[Need], str]
    attributes: Callable[[Product], dict]  # a product's facets: {"brand", "category", "colour", "audience"}

    def tags(self, need: Need) -> str:
        """The query's traffic tier and its department (query segments)."""
        return f"{query_tier(self.tiers, need.qid)},{self.department(need)}"


def query_tier(tiers: tuple[tuple[str, int], ...], qid: str) -> str:
    """Query traffic tiers as a shop's search logs would give them: the first queries are the most searched."""
    n = int(qid.lstrip("q"))
    return next(tier for tier, last in tiers if n <= last)


def generate(vocabulary: Vocabulary, seed: int) -> DemoData:
    """A vocabulary's products, hidden relevance and runs, the same for the same seed."""
    rng = random.Random(seed)
    products = _products(rng, vocabulary)
    truth = {(q.qid, p.docid): relevance(q, p) for q in vocabulary.queries for p in products}
    runs = _runs(rng, vocabulary, products, truth)
    return DemoData(tuple(products), truth, runs, vocabulary.queries, vocabulary.tags, vocabulary.attributes)


def _products(rng: random.Random, vocabulary: Vocabulary) -> list[Product]:
    specs: list[tuple[Spec, str, str]] = []
    for q in vocabulary.queries:
        specs.extend((s, *vocabulary.words(rng, s)) for s in vocabulary.variants(rng, q))
    kinds = sorted(vocabulary.kinds)
    while len(specs) < vocabulary.listings:
        spec = vocabulary.spec(rng, rng.choice(kinds))
        specs.append((spec, *vocabulary.words(rng, spec)))
    specs.extend(vocabulary.imported)
    # Two listings re-posted by a reseller: same words, another id (and the same score in a lexical ranker).
    specs.extend(rng.sample(specs[: len(vocabulary.queries) * 8], 2))
    rng.shuffle(specs)
    numbers = rng.sample(vocabulary.numbers, len(specs))
    products = []
    for number, (spec, title, text) in zip(numbers, specs, strict=True):
        url = vocabulary.url.format(number=number) if rng.random() < 0.6 else ""
        colour_family = vocabulary.colours.get(spec.colour, "")
        products.append(
            Product(
                vocabulary.docid.format(number=number),
                spec.kind,
                spec.audience,
                spec.material,
                spec.colour,
                spec.features,
                title,
                text,
                url,
                colour_family,
            )
        )
    return products


def _runs(rng: random.Random, vocabulary: Vocabulary, products: list[Product], truth: dict) -> dict[str, str]:
    """TREC run text of the vocabulary's systems, each ranking 50-100 products per query."""
    # Popularity follows the listing's words, so a re-posted duplicate ties with its original in a lexical ranker.
    popularity = [round(random.Random(p.title + p.text).random(), 3) for p in products]
    docs = [vocabulary.tokens(p.title + " " + p.title + " " + p.text) for p in products]  # the title counts double
    lines: dict[str, list[str]] = {}
    for q in vocabulary.queries:
        lexical = bm25(docs, vocabulary.tokens(q.text))
        verdicts = [truth[q.qid, p.docid] for p in products]
        for name, scores in vocabulary.scores(rng, q, products, verdicts, lexical, popularity).items():
            ranked = sorted(zip(scores, (p.docid for p in products), strict=True), key=lambda x: (-x[0], x[1]))
            lines.setdefault(name, []).extend(
                f"{q.qid} Q0 {docid} {rank} {score} {name}"
                for rank, (score, docid) in enumerate(ranked[: rng.randint(50, 100)], 1)
            )
    return {name: "\n".join(rows) + "\n" for name, rows in lines.items()}


@dataclass(frozen=True)
class DemoData:
    """A catalogue's demo: its products, hidden relevance and runs, and the files the loader imports. The
    vocabulary says how it tags a query and describes a product."""

    products: tuple  # of Product
    truth: dict  # (qid, docid) -> Verdict
    runs: dict  # system name -> TREC run text
    queries: tuple  # of Need
    tags: Callable  # Need -> "tier,department"
    attributes: Callable  # Product -> {"brand", "category", "colour", "audience"}

    def topics_tsv(self) -> bytes:
        """Topics with a fourth column of tags: the query's traffic tier and its department (query segments)."""
        return "".join(f"{q.qid}\t{q.text}\t{q.description}\t{self.tags(q)}\n" for q in self.queries).encode()

    def docs_jsonl(self) -> bytes:
        rows = []
        for p in self.products:
            row = {"docid": p.docid, "title": p.title, "text": p.text}
            if p.url:
                row["url"] = p.url
            # facets a shop's catalogue has: the leaderboard measures diversity over them
            row["attributes"] = self.attributes(p)
            rows.append(json.dumps(row, ensure_ascii=False) + "\n")
        return "".join(rows).encode()


@dataclass(frozen=True)
class Profile:
    slip: float  # chance of an off-by-one grade on an on-topic listing
    lean: float  # -1 always stricter ... +1 always more lenient when slipping
    unsure: float  # chance of marking unsure when the listing does not say what decides the grade
    pace: float  # median seconds per judgment


@dataclass
class Decision:
    grade: int | None
    unsure: bool = False
    tentative: int | None = None
    note: str = ""
    seconds: float = 10.0
    settled_by: str = ""  # for an unsure decision: the note once the missing evidence is found


@dataclass(frozen=True)
class Words:
    """What an annotator of a catalogue writes, in its language: the notes of ``decide``."""

    unclear: dict[str, tuple[str, ...]]  # unsure: the listing does not say whose fit it is, by audience
    imported: tuple[str, ...]  # unsure: an imported listing full of markup
    substitute: tuple[str, ...]  # unsure: does a substitute count?
    misses: dict[str, tuple[str, ...]]  # a note on what an on-topic listing lacks, by kind of miss
    imported_prefix: str  # how an imported listing's text begins
    resolved: tuple[str, str, str]  # the note when the unclear, imported or substitute case is settled later


def decide(
    rng: random.Random, profile: Profile, need: Need, product: Product, verdict: Verdict, words: Words
) -> Decision:
    """One annotator's judgment of a listing whose true grade is ``verdict``, with the habits of ``profile``
    (unsure where the listing leaves the grade open, slips, leaning) and notes in ``words``' language."""
    seconds = min(40.0, max(3.0, rng.lognormvariate(math.log(profile.pace), 0.5)))
    slow = round(rng.uniform(18, 40), 1)  # hesitating takes time
    if verdict.unclear and rng.random() < profile.unsure:
        audience = "kids" if "kids" in need.audiences else "women" if "women" in need.audiences else "men"
        tentative = None if rng.random() < 0.3 else min(2, verdict.grade + rng.randint(0, 1))
        return Decision(
            None,
            True,
            tentative,
            rng.choice(words.unclear[audience]),
            slow,
            words.resolved[0],
        )
    if verdict.on_topic and product.text.startswith(words.imported_prefix) and rng.random() < profile.unsure / 2:
        return Decision(
            None,
            True,
            verdict.grade,
            rng.choice(words.imported),
            slow,
            words.resolved[1],
        )
    if verdict.misses[:1] == ("kind",) and verdict.grade and rng.random() < profile.unsure / 4:
        tentative = verdict.grade if rng.random() < 0.7 else None
        return Decision(
            None,
            True,
            tentative,
            rng.choice(words.substitute),
            slow,
            words.resolved[2],
        )
    grade = verdict.grade
    if verdict.on_topic:
        slip = profile.slip * (1.5 if grade == 1 else 0.7)
        if rng.random() < slip:
            up = grade == 0 or (grade < 2 and rng.random() < 0.5 + profile.lean / 2)
            step = 2 if rng.random() < 0.25 else 1  # now and then a real dispute, two grades apart
            grade = min(2, grade + step) if up else max(0, grade - step)
            seconds = min(40.0, seconds * 1.4)
    elif rng.random() < 0.01:
        grade = 1  # a slip of the key
    note = ""
    if verdict.misses and grade > 0 and rng.random() < 0.15:
        note = rng.choice(words.misses[verdict.misses[0]])
    return Decision(grade, note=note, seconds=round(seconds, 1))


class Clock:
    """An annotator's working time: judgments one after another, in sessions of 40-90 on past days."""

    def __init__(self, rng: random.Random, start: datetime) -> None:
        self.rng = rng
        self.now = start
        self.left = rng.randint(40, 90)

    def next_morning(self) -> None:
        self.now = (self.now + timedelta(days=1)).replace(hour=8, minute=self.rng.randint(30, 59))
        self.left = self.rng.randint(40, 90)

    def tick(self, seconds: float) -> datetime:
        if self.left == 0:
            self.left = self.rng.randint(40, 90)
            if self.now.hour >= 15:
                self.now = (self.now + timedelta(days=1)).replace(hour=9, minute=self.rng.randint(0, 50))
            else:
                self.now += timedelta(hours=self.rng.uniform(1, 2.5))
        self.left -= 1
        self.now += timedelta(seconds=seconds + self.rng.uniform(2, 12))
        return self.now
