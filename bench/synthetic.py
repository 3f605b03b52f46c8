"""Generated test collections with known relevance for the benches and the tests (pure numpy and metrics/).

Two presets:

* ``easy`` (the effort bench's first generator, unchanged for a seed): systems of evenly spread quality score
  each document ``quality * grade + N(0, 1)``; grades 0-2, 5-30% of the candidates relevant. Neighbouring
  systems are far apart, so any queue mode finds the order early.
* ``realistic`` (the default): shaped like a TREC ad-hoc track (TREC Deep Learning and Robust have 37-59 runs,
  43-54 queries, depth-10 pools of about 2,500 pairs, half of them relevant, and adjacent nDCG@10 differences
  often under 0.005). Runs come in families, as the systems of a track do: a few first stages retrieve the top
  ``depth`` of each query's candidates; rerankers reorder a first stage's list (two rerankers on one first stage
  share their candidates; one reranker on two first stages shares its judgement of a document); parameter sweeps
  interpolate a first stage and its reranker; reruns with another seed perturb a reranker's scores a little.
  Grades 0-3; each query has its own share of relevant candidates (from almost none to most) and its own
  difficulty (how well a document's grade shows in the scores). Every system also sees a document-level
  "looks relevant" term, so their mistakes agree as real systems' do.

  What real run files hold and the import refuses or orders by rule is there too: scores rounded to 2-4
  decimals and exact duplicates of a document under another docid, so runs have tied scores (trec_eval orders
  them by docid, descending); a few runs that list a docid twice in a query (a passage run collapsed to
  documents), one run that returned nothing for some queries, and some lists shorter than ``depth``. A docid
  listed twice in one query of a run is an input error (SPEC §3: the import refuses the whole file, naming the
  line), so the files are written after a clean-up that keeps each docid's first line in trec_eval order (its
  highest score) and drops the other, as a participant would before submitting; ``duplicates="keep"`` writes
  the raw lines, which the import refuses. ``Collection.duplicates`` lists what the clean-up dropped.

Every number comes from one ``numpy.random.Generator`` seeded by ``seed``: a preset and a seed always give the
same collection. ``Collection`` holds arrays (runs as candidate indices per rank in trec_eval order, every
candidate's true grade) for the tests that work in arrays, and writes TREC files for the app and the benches;
``collection_stats`` measures how hard a collection is (adjacent nDCG@k gaps, the relevant share of the pool, the
spread of relevant documents per query).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

import metrics

PRESETS = ("realistic", "easy")
DEFAULTS: dict[str, dict[str, int]] = {
    "easy": {"systems": 20, "queries": 50, "depth": 20, "docs": 0},
    "realistic": {"systems": 48, "queries": 50, "depth": 100, "docs": 0},
}
SPEC_KEYS = ("systems", "queries", "depth", "docs", "seed")


class SpecError(ValueError):
    """A generator spec or argument that cannot be used; the message says which part and why."""


# --------------------------------------------------------------------------- the collection


@dataclass(frozen=True)
class Collection:
    """A generated collection: runs as arrays in trec_eval order, every candidate's true grade, and the lines
    of its files."""

    preset: str
    seed: int
    systems: tuple[str, ...]  # run tags, in generation order
    kinds: tuple[str, ...]  # what each system is: "first stage", "reranker", "sweep", "rerun", "quality 0.73"
    ranked: np.ndarray  # (S, Q, D) int64: the candidate at each rank (trec_eval order), -1 past the run's end
    units: np.ndarray  # (S, Q, D) int64: the score written, in units of 10^-decimals[s]; 0 past the end
    decimals: np.ndarray  # (S,) int64: decimals of each system's scores
    grades: np.ndarray  # (Q, N) int8: the true grade of every candidate document
    qrels_known: np.ndarray  # (Q, N) bool: the candidates the qrels file lists
    # (system, query, candidate, units): a second line for a docid the run already lists (see the module doc)
    duplicates: tuple[tuple[int, int, int, int], ...] = ()
    # (S, Q, D) int64: the file lists ranked[s, q, file_order[s, q, i]] on its i-th line of the query; None: the
    # file follows ``ranked`` (the easy preset keeps its generator's order, which differs where scores tie)
    file_order: np.ndarray | None = None
    qid_format: str = "q{q}"
    docid_format: str = "{qid}-d{d}"
    _docid_order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    # ------------------------------------------------------------------ names

    @property
    def shape(self) -> tuple[int, int, int]:
        s, q, d = self.ranked.shape
        return s, q, d

    @property
    def scale(self) -> list[int]:
        """The grading scale: 0 to the top grade of the preset."""
        return list(range(int(self.grades.max(initial=0)) + 1)) if self.preset == "easy" else [0, 1, 2, 3]

    def qid(self, q: int) -> str:
        return self.qid_format.format(q=q + 1)

    def docid(self, q: int, d: int) -> str:
        return self.docid_format.format(qid=self.qid(q), d=d)

    @property
    def qids(self) -> list[str]:
        return [self.qid(q) for q in range(self.shape[1])]

    # ------------------------------------------------------------------ arrays

    def labels(self, known: np.ndarray | None = None) -> np.ndarray:
        """(S, Q, D) int8 ranked labels as metrics/ reads them: the true grade where ``known`` (Q, N) says the
        candidate is labelled (default: everywhere), UNJUDGED elsewhere, PAD past a run's end."""
        _, n_q, _ = self.shape
        at = np.maximum(self.ranked, 0)
        grade = self.grades[np.arange(n_q)[None, :, None], at]
        if known is not None:
            grade = np.where(known[np.arange(n_q)[None, :, None], at], grade, metrics.UNJUDGED)
        return np.where(self.ranked >= 0, grade, metrics.PAD).astype(np.int8)

    def qrels(self, known: np.ndarray | None = None) -> np.ndarray:
        """(Q, M) int8 qrels rows (every labelled candidate's grade, best first, UNJUDGED padding) of the
        candidates ``known`` (Q, N) says are labelled (default: those the qrels file lists)."""
        mask = self.qrels_known if known is None else known
        rows = np.where(mask, self.grades, metrics.UNJUDGED).astype(np.int8)
        width = max(int(mask.sum(axis=1).max(initial=0)), 1)
        return np.sort(rows, axis=1)[:, ::-1][:, :width].copy()

    def pool(self, depth: int) -> np.ndarray:
        """(Q, N) bool: the candidates some run ranks within ``depth`` (the depth-``depth`` pool)."""
        n_s, n_q, _ = self.shape
        pooled = np.zeros(self.grades.shape, dtype=bool)
        top = self.ranked[:, :, :depth]
        q = np.broadcast_to(np.arange(n_q)[None, :, None], top.shape)
        pooled[q[top >= 0], top[top >= 0]] = True
        return pooled

    # ------------------------------------------------------------------ files

    def _score(self, units: int, decimals: int) -> str:
        return f"{units / 10**decimals:.{decimals}f}" if decimals else str(units)

    def run_text(self, s: int, *, duplicates: Literal["drop", "keep"] = "drop") -> str:
        """System ``s``'s run file: ``qid Q0 docid rank score tag`` lines, each query's in trec_eval order with
        ranks 1..n. ``duplicates="keep"``: the raw file, a docid listed twice in some queries (the import
        refuses it)."""
        tag, dec = self.systems[s], int(self.decimals[s])
        extra: dict[int, list[tuple[int, int]]] = {}
        if duplicates == "keep":
            for ds, dq, dd, du in self.duplicates:
                if ds == s:
                    extra.setdefault(dq, []).append((dd, du))
        out = []
        for q in range(self.shape[1]):
            row = self.ranked[s, q]
            n = int((row >= 0).sum())
            entries = list(zip(row[:n].tolist(), self.units[s, q, :n].tolist(), strict=True))
            if self.file_order is not None:
                entries = [entries[i] for i in self.file_order[s, q, :n].tolist()]
            if q in extra:
                entries = sorted(entries + extra[q], key=lambda e: (-e[1], -int(self._docid_rank(e[0]))))
            qid = self.qid(q)
            out.extend(
                f"{qid} Q0 {self.docid(q, d)} {r} {self._score(u, dec)} {tag}\n"
                for r, (d, u) in enumerate(entries, start=1)
            )
        return "".join(out)

    def _docid_rank(self, d: int) -> int:
        return int(self._docid_order[d])

    def qrels_text(self) -> str:
        """``qid 0 docid grade`` for every candidate the qrels list, query by query."""
        q_idx, d_idx = np.nonzero(self.qrels_known)
        return "".join(
            f"{self.qid(q)} 0 {self.docid(q, d)} {int(self.grades[q, d])}\n"
            for q, d in zip(q_idx.tolist(), d_idx.tolist(), strict=True)
        )

    def topics_text(self) -> str:
        return "".join(
            f"{self.qid(q)}\tgenerated query {q + 1}\tA query of the generated collection.\n"
            for q in range(self.shape[1])
        )

    def write(self, folder: Path, *, duplicates: Literal["drop", "keep"] = "drop") -> tuple[Path, list[Path], Path]:
        """Write ``qrels.txt``, ``topics.tsv`` and ``runs/<tag>.run`` into ``folder``; their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "runs").mkdir(exist_ok=True)
        (folder / "qrels.txt").write_text(self.qrels_text())
        (folder / "topics.tsv").write_text(self.topics_text())
        runs = []
        for s, tag in enumerate(self.systems):
            path = folder / "runs" / f"{tag}.run"
            path.write_text(self.run_text(s, duplicates=duplicates))
            runs.append(path)
        return folder / "qrels.txt", runs, folder / "topics.tsv"


def _docid_order(n_docs: int, docid_format: str) -> np.ndarray:
    """Rank of each candidate's docid in byte order (the docids of one query differ only in the candidate)."""
    order = sorted(range(n_docs), key=lambda d: docid_format.format(qid="", d=d).encode())
    rank = np.empty(n_docs, dtype=np.int64)
    rank[order] = np.arange(n_docs)
    return rank


def _trec_order(units: np.ndarray, docid_rank: np.ndarray) -> np.ndarray:
    """Per (system, query), the candidates' order by score descending, ties by docid descending (trec_eval)."""
    return np.lexsort((-docid_rank, -units), axis=-1)


# --------------------------------------------------------------------------- presets


def parse_spec(spec: str, *, seed: int) -> dict[str, int]:
    """``systems=N,queries=N,depth=N[,docs=N,seed=N]`` -> the values given, with ``seed`` unless the spec
    names one."""
    values: dict[str, int] = {"seed": seed}
    for part in filter(None, spec.split(",")):
        name, _, value = part.partition("=")
        if name not in SPEC_KEYS or not value.isdigit() or int(value) < 1:
            raise SpecError(f"expected systems=N,queries=N,depth=N[,docs=N,seed=N], not {part!r}")
        values[name] = int(value)
    return values


def generate(
    preset: str = "realistic",
    *,
    seed: int = 1,
    systems: int | None = None,
    queries: int | None = None,
    depth: int | None = None,
    docs: int | None = None,
) -> Collection:
    """The collection of ``preset`` for ``seed``; ``systems``, ``queries``, ``depth`` (run length) and ``docs``
    (candidates per query, default 3 x depth) override the preset's sizes."""
    if preset not in PRESETS:
        raise SpecError(f"unknown preset {preset!r}; the presets are {', '.join(PRESETS)}")
    given = {"systems": systems, "queries": queries, "depth": depth, "docs": docs}
    sizes = {name: (DEFAULTS[preset][name] if value is None else value) for name, value in given.items()}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "docs" else 1):
            raise SpecError(f"{name} must be a whole number >= 1, not {value!r}")
    n_docs = sizes["docs"] or 3 * sizes["depth"]
    if n_docs < sizes["depth"]:
        raise SpecError(f"docs ({n_docs}) must be at least depth ({sizes['depth']})")
    if preset == "easy":
        return _easy(sizes["systems"], sizes["queries"], sizes["depth"], n_docs, seed)
    return _realistic(sizes["systems"], sizes["queries"], sizes["depth"], n_docs, seed)


def _easy(n_sys: int, n_q: int, depth: int, n_docs: int, seed: int) -> Collection:
    """The effort bench's first generator, draw for draw (its files are byte for byte those it wrote).

    Each query has ``n_docs`` candidates; a share of them (5-30 %, per query) is relevant, graded 1 or 2.
    System s has a quality q_s spread over [0.2, 1.2]; it scores a document q_s * grade + N(0, 1) and returns
    its top ``depth``."""
    rng = np.random.default_rng(seed)
    quality = np.linspace(0.2, 1.2, n_sys)
    rng.shuffle(quality)
    grades = np.zeros((n_q, n_docs), dtype=np.int8)
    ranked = np.empty((n_sys, n_q, depth), dtype=np.int64)
    units = np.empty((n_sys, n_q, depth), dtype=np.int64)
    for q in range(n_q):
        share = rng.uniform(0.05, 0.3)
        grade = np.where(rng.random(n_docs) < share, rng.integers(1, 3, n_docs), 0)
        grades[q] = grade
        for s in range(n_sys):
            score = quality[s] * grade + rng.normal(0, 1, n_docs)
            top = np.argsort(-score)[:depth]
            ranked[s, q] = top
            # the written score, exactly as "{:.4f}" rounds it
            units[s, q] = [int(f"{x:.4f}".replace(".", "")) for x in score[top].tolist()]
    docid_rank = _docid_order(n_docs, "{qid}-d{d}")
    # the file keeps the generator's order; the arrays follow trec_eval's, which differs where scores tie
    # after rounding (a few dozen lists of the default collection)
    order = _trec_order(units, docid_rank[ranked])
    return Collection(
        preset="easy",
        seed=seed,
        systems=tuple(f"sys{s + 1:02d}" for s in range(n_sys)),
        kinds=tuple(f"quality {x:.2f}" for x in quality.tolist()),
        ranked=np.take_along_axis(ranked, order, axis=-1),
        units=np.take_along_axis(units, order, axis=-1),
        decimals=np.full(n_sys, 4, dtype=np.int64),
        grades=grades,
        qrels_known=np.ones((n_q, n_docs), dtype=bool),
        file_order=np.argsort(order, axis=-1),
        qid_format="g{q}",
        docid_format="{qid}-d{d}",
        _docid_order=docid_rank,
    )


# the mean score a grade adds before a query's difficulty scales it (grade 0 adds nothing)
GRADE_SIGNAL = np.array([0.0, 1.2, 1.8, 2.4])
FIRST_STAGES = ("bm25", "bm25rm3", "d2q", "splade", "dense", "dense2", "hybrid")
DOCID_FORMAT = "D{qid}-{d:04d}"
RERANKERS = ("monot5", "monobert", "ce-mini", "duot5", "colbert", "listwise")


def _realistic(n_sys: int, n_q: int, depth: int, n_docs: int, seed: int) -> Collection:
    """A TREC-like track (see the module docstring): families of first stages, rerankers, sweeps and reruns."""
    rng = np.random.default_rng(seed)
    shape = (n_q, n_docs)
    # --- the documents: grades, each query's difficulty, what every system sees in them
    rate = np.clip(rng.beta(0.5, 2.0, n_q), 0.004, 0.85)  # share of relevant candidates: hard to easy queries
    relevant = rng.random(shape) < rate[:, None]
    grades = np.where(relevant, rng.choice([1, 2, 3], size=shape, p=[0.45, 0.33, 0.22]), 0).astype(np.int8)
    clarity = rng.uniform(0.45, 1.5, n_q)[:, None]  # how well a grade shows in any system's scores
    looks = rng.normal(0, 1, shape)  # "looks relevant" to every system
    copies = _copies(rng, n_q, n_docs)  # candidate -> the candidate it is an exact copy of (itself if none)
    grades = np.take_along_axis(grades, copies, axis=1)
    looks = np.take_along_axis(looks, copies, axis=1)
    signal = clarity * GRADE_SIGNAL[grades] + looks

    def noise() -> np.ndarray:
        return np.take_along_axis(rng.normal(0, 1, shape), copies, axis=1)  # a copy scores as its original

    # --- the systems: first stages, rerankers of some of them, then sweeps and reruns of the rerankers
    n_first = min(int(np.clip(round(n_sys / 9), 2, len(FIRST_STAGES))), n_sys)
    n_kinds = int(np.clip(round(n_sys / 10), 2, len(RERANKERS)))
    first_scores = []
    for _ in range(n_first):
        first_scores.append(rng.uniform(0.5, 0.9) * signal + rng.uniform(1.0, 1.4) * noise())
    cross = noise()  # what cross-encoders agree on beyond the first stages
    kind_scores = []
    for _ in range(n_kinds):
        view = rng.uniform(1.0, 1.7) * clarity * GRADE_SIGNAL[grades] + 0.7 * looks + 0.6 * cross
        kind_scores.append(view + rng.uniform(0.35, 0.7) * noise())
    names: list[str] = []
    kinds: list[str] = []
    scores: list[np.ndarray] = []  # (Q, N) each system's score of every candidate
    firsts: list[int] = []  # the first stage whose list each system reorders
    decimals: list[int] = []

    def add(name: str, kind: str, score: np.ndarray, first: int, dec: int) -> None:
        unique, again = name, 1
        while unique in names:  # a sweep point taken twice
            again += 1
            unique = f"{name}-{again}"
        names.append(unique)
        kinds.append(kind)
        scores.append(score)
        firsts.append(first)
        decimals.append(dec)

    for f in range(n_first):  # BM25-like scores: 2 decimals
        add(FIRST_STAGES[f], "first stage", 12.0 + 3.0 * first_scores[f], f, 2)
    combos = [(k, f) for k in range(n_kinds) for f in range(n_first)]
    rng.shuffle(combos)
    n_rerank = min(len(combos), max(1, (n_sys - n_first) // 2), n_sys - n_first)
    for k, f in combos[:n_rerank]:  # logits: 3 decimals
        add(f"{FIRST_STAGES[f]}.{RERANKERS[k]}", "reranker", kind_scores[k], f, 3)
    reranked = list(range(n_first, n_first + n_rerank)) or list(range(n_first))
    while len(names) < n_sys:
        base = int(rng.choice(reranked))
        f = firsts[base]
        if rng.random() < 0.5:  # a sweep: the first stage's and the reranker's scores interpolated
            first_z, rerank_z = _standardize(scores[f]), _standardize(scores[base])
            start = rng.uniform(0.3, 0.6)
            for step in range(min(int(rng.integers(2, 5)), n_sys - len(names))):
                weight = min(start + 0.1 * step, 0.95)
                mixed = weight * rerank_z + (1 - weight) * first_z
                add(f"{names[base]}.w{round(100 * weight)}", "sweep", mixed, f, 4)
        else:  # reruns: the reranker trained again with other seeds
            for _ in range(min(int(rng.integers(1, 4)), n_sys - len(names))):
                eps = rng.uniform(0.05, 0.25)
                seed_no = 2 + sum(1 for other in names if other.startswith(names[base] + ".seed"))
                add(f"{names[base]}.seed{seed_no}", "rerun", scores[base] + eps * noise(), f, 3)
    # --- each run: the top ``depth`` of its first stage's candidates, reordered by its own scores
    docid_rank = _docid_order(n_docs, DOCID_FORMAT)
    n_s = len(names)
    first_top = [np.argsort(-x, axis=1, kind="stable")[:, :depth] for x in first_scores]
    ranked = np.empty((n_s, n_q, depth), dtype=np.int64)
    units = np.empty((n_s, n_q, depth), dtype=np.int64)
    for s in range(n_s):
        cand = first_top[firsts[s]]
        u = np.rint(np.take_along_axis(scores[s], cand, axis=1) * 10 ** decimals[s]).astype(np.int64)
        order = _trec_order(u, docid_rank[cand])
        ranked[s] = np.take_along_axis(cand, order, axis=1)
        units[s] = np.take_along_axis(u, order, axis=1)
    # --- what real run files have besides: short lists, a run that missed queries, docids listed twice
    short = rng.random((n_s, n_q)) < 0.04
    length = np.where(short, rng.integers(max(1, depth // 5), depth, (n_s, n_q)), depth)
    if n_s > 2 and n_q > 3:
        failed = int(rng.integers(0, n_s))
        length[failed, rng.choice(n_q, size=max(1, n_q // 20), replace=False)] = 0
    cut = np.arange(depth)[None, None, :] >= length[..., None]
    ranked[cut] = -1
    units[cut] = 0
    duplicates = []
    for s in rng.choice(n_s, size=max(1, n_s // 12), replace=False).tolist():
        for q in np.flatnonzero(rng.random(n_q) < 0.25).tolist():
            n = int(length[s, q])
            if n < 4:
                continue
            for r in rng.choice(np.arange(1, n - 1), size=min(2, n - 2), replace=False).tolist():
                lower = int(rng.integers(r + 1, n))  # listed again just below a later document
                duplicates.append((s, q, int(ranked[s, q, r]), int(units[s, q, lower]) - 1))
    return Collection(
        preset="realistic",
        seed=seed,
        systems=tuple(names),
        kinds=tuple(kinds),
        ranked=ranked,
        units=units,
        decimals=np.array(decimals, dtype=np.int64),
        grades=grades,
        qrels_known=np.ones(shape, dtype=bool),
        duplicates=tuple(duplicates),
        qid_format="{q}",
        docid_format=DOCID_FORMAT,
        _docid_order=docid_rank,
    )


def _copies(rng: np.random.Generator, n_q: int, n_docs: int) -> np.ndarray:
    """(Q, N): for about 3% of the candidates, another candidate of the query they are an exact copy of
    (the same text under another docid: the same grade and the same score in every run)."""
    copies = np.broadcast_to(np.arange(n_docs), (n_q, n_docs)).copy()
    pick = rng.random((n_q, n_docs)) < 0.03
    original = rng.integers(0, n_docs, (n_q, n_docs))
    pick &= ~np.take_along_axis(pick, original, axis=1)  # copies of originals only
    copies[pick] = original[pick]
    return copies


def _standardize(score: np.ndarray) -> np.ndarray:
    mean = score.mean(axis=1, keepdims=True)
    sd = score.std(axis=1, keepdims=True)
    out: np.ndarray = (score - mean) / np.where(sd > 0, sd, 1.0)
    return out


# --------------------------------------------------------------------------- how hard a collection is


@dataclass(frozen=True)
class Stats:
    """What makes a collection hard to rank from few judgments, computed with every pooled pair judged."""

    systems: int
    queries: int
    pool_pairs: int
    pairs_per_query: tuple[int, int, int]  # min, median, max
    relevant_share: float  # of the pooled pairs, grade >= 1
    relevant_per_query: tuple[int, int, int, int, int]  # min, lower quartile, median, upper quartile, max
    hard_queries: int  # at most 2 relevant pooled pairs
    easy_queries: int  # at least 75% of the query's pooled pairs relevant
    ndcg_range: tuple[float, float]  # the lowest and highest mean nDCG@k
    gap_median: float  # of the nDCG@k differences of systems adjacent in the final ranking
    gaps_under_01: float  # share of those differences under 0.01
    gaps_under_001: float  # share under 0.001
    k: int

    def lines(self) -> list[str]:
        ppq, rpq = self.pairs_per_query, self.relevant_per_query
        return [
            f"{self.systems} systems, {self.queries} queries; pool {self.pool_pairs} pairs, per query "
            f"{ppq[0]}-{ppq[2]} (median {ppq[1]}); relevant {100 * self.relevant_share:.0f}% of the pool",
            f"relevant pooled pairs per query: min {rpq[0]}, quartiles {rpq[1]}/{rpq[2]}/{rpq[3]}, max {rpq[4]}; "
            f"queries with <= 2: {self.hard_queries}, with >= 75% of their pool relevant: {self.easy_queries}",
            f"nDCG@{self.k} of the whole pool: {self.ndcg_range[0]:.3f}-{self.ndcg_range[1]:.3f}; adjacent gaps: "
            f"median {self.gap_median:.4f}, {100 * self.gaps_under_01:.0f}% under 0.01, "
            f"{100 * self.gaps_under_001:.0f}% under 0.001",
        ]


def stats_of(labels: np.ndarray, pool_query: np.ndarray, pool_grade: np.ndarray, *, k: int = 10) -> Stats:
    """``labels`` (S, Q, D): ranked labels with every pooled pair's grade (UNJUDGED elsewhere, PAD past a run's
    end); ``pool_query``, ``pool_grade`` (P,): each pooled pair's query and grade. Means over the queries with a
    pooled pair, as the leaderboard's."""
    n_s, n_q, _ = labels.shape
    per_query = np.bincount(pool_query, minlength=n_q)
    rel = np.bincount(pool_query, weights=pool_grade >= 1, minlength=n_q).astype(np.int64)
    width = max(int(per_query.max(initial=0)), 1)
    order = np.lexsort((-pool_grade, pool_query))
    slot = np.arange(pool_query.size) - (np.cumsum(per_query) - per_query)[pool_query[order]]
    qrels = np.full((n_q, width), metrics.UNJUDGED, dtype=np.int8)
    qrels[pool_query[order], slot] = pool_grade[order]
    scored = per_query > 0
    means = metrics.ndcg(labels, qrels, k=k)[:, scored].mean(axis=1) if scored.any() else np.zeros(n_s)
    ranking = np.sort(means)[::-1]
    gaps = ranking[:-1] - ranking[1:]
    with_pool = per_query[scored]
    share = rel[scored] / with_pool
    return Stats(
        systems=n_s,
        queries=n_q,
        pool_pairs=int(pool_query.size),
        pairs_per_query=_three(with_pool),
        relevant_share=float((pool_grade >= 1).mean()) if pool_grade.size else 0.0,
        relevant_per_query=tuple(int(x) for x in np.percentile(rel[scored], [0, 25, 50, 75, 100], method="lower"))
        if scored.any()
        else (0, 0, 0, 0, 0),  # type: ignore[arg-type]
        hard_queries=int((rel[scored] <= 2).sum()),
        easy_queries=int((share >= 0.75).sum()),
        ndcg_range=(float(means.min()), float(means.max())) if means.size else (0.0, 0.0),
        gap_median=float(np.median(gaps)) if gaps.size else 0.0,
        gaps_under_01=float((gaps < 0.01).mean()) if gaps.size else 0.0,
        gaps_under_001=float((gaps < 0.001).mean()) if gaps.size else 0.0,
        k=k,
    )


def _three(values: np.ndarray) -> tuple[int, int, int]:
    if not values.size:
        return 0, 0, 0
    return int(values.min()), int(np.median(values)), int(values.max())


def collection_stats(coll: Collection, *, pool_depth: int = 10, k: int = 10) -> Stats:
    """``stats_of`` the collection judged to ``pool_depth``."""
    pooled = coll.pool(pool_depth)
    q, d = np.nonzero(pooled)
    return stats_of(coll.labels(pooled), q, coll.grades[q, d].astype(np.int64), k=k)


# --------------------------------------------------------------------------- a simulated model judge

# P(model grade | human grade) on the 0-3 scale, rows by human grade: model judges of today's quality, shaped like
# the confusion matrices LLM judges show against NIST's labels (Thomas et al., SIGIR 2024; the LLMJudge challenge,
# Rahmani et al. 2024, where submissions reached a quadratic-weighted kappa of about 0.4 to 0.5 with TREC's
# assessors): most mass on or next to the human grade, a bias towards calling marginal documents relevant, and
# the middle grades the least reliable. The two LLM presets are named by the kappa they reach on the realistic
# preset (seeds 1-3); tests/bench/test_synthetic.py holds them to it.
CONFUSIONS: dict[str, np.ndarray] = {
    # quadratic-weighted kappa against the true grades of the realistic preset's depth-10 pools: 0.37-0.40
    "llm-0.4": np.array(
        [
            [0.45, 0.28, 0.18, 0.09],
            [0.28, 0.32, 0.26, 0.14],
            [0.13, 0.24, 0.33, 0.30],
            [0.08, 0.18, 0.30, 0.44],
        ]
    ),
    # ... 0.49-0.53
    "llm-0.5": np.array(
        [
            [0.54, 0.26, 0.14, 0.06],
            [0.26, 0.36, 0.26, 0.12],
            [0.10, 0.23, 0.38, 0.29],
            [0.06, 0.13, 0.30, 0.51],
        ]
    ),
    "perfect": np.eye(4),
    "random": np.full((4, 4), 0.25),
    # worse than chance: the grades reversed, for the page that says a model is not helping
    "reversed": np.eye(4)[::-1],
}


def confusion_matrix(spec: str | Path, *, grades: int = 4) -> np.ndarray:
    """A confusion matrix P(model grade | human grade) (grades x grades, rows by human grade): a preset of
    :data:`CONFUSIONS` by name, or a file of ``grades`` lines of ``grades`` numbers (commas or spaces). Rows are
    normalized; SpecError names the line and what is wrong."""
    if str(spec) in CONFUSIONS:
        matrix = CONFUSIONS[str(spec)]
    else:
        path = Path(spec)
        if not path.is_file():
            raise SpecError(f"--model-confusion: {spec!r} is neither a preset ({', '.join(CONFUSIONS)}) nor a file")
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                values = [float(v) for v in line.replace(",", " ").split()]
            except ValueError:
                raise SpecError(f"{path}, line {number}: not numbers: {line.strip()[:60]!r}") from None
            if len(values) != grades or min(values) < 0 or sum(values) <= 0:
                raise SpecError(f"{path}, line {number}: expected {grades} numbers >= 0 with a positive sum")
            rows.append(values)
        if len(rows) != grades:
            raise SpecError(f"{path}: expected {grades} rows (one per human grade), got {len(rows)}")
        matrix = np.array(rows)
    if matrix.shape != (grades, grades):
        raise SpecError(f"the confusion matrix must be {grades} x {grades}, got {matrix.shape}")
    out: np.ndarray = matrix / matrix.sum(axis=1, keepdims=True)
    return out


def model_answers(
    grades: np.ndarray, confusion: np.ndarray, *, seed: int, repeats: int = 1, doubt: float = 0.0
) -> np.ndarray:
    """(Q, N, G) a simulated model judge's answers for every candidate: how often it gave each grade over
    ``repeats`` askings. Each pair has its own tendency (its row of ``confusion`` at the true grade, mixed with a
    pair-level draw from the same row, weight ``1 - doubt``): a real model answers the same pair much the same way
    each time, and its mistakes on a pair repeat, so repeated answers agree more than independent draws would."""
    rng = np.random.default_rng(seed)
    g = confusion.shape[0]
    rows = confusion[np.clip(grades, 0, g - 1)]  # (Q, N, G)
    cdf = np.cumsum(rows, axis=-1)
    favourite = (rng.random(grades.shape)[..., None] >= cdf).sum(axis=-1).clip(0, g - 1)  # the pair's own answer
    answers = np.zeros((*grades.shape, g), dtype=np.int64)
    for _ in range(repeats):  # a handful of askings
        fresh = (rng.random(grades.shape)[..., None] >= cdf).sum(axis=-1).clip(0, g - 1)
        given = np.where(rng.random(grades.shape) < doubt, fresh, favourite)
        np.put_along_axis(answers, given[..., None], np.take_along_axis(answers, given[..., None], -1) + 1, -1)
    return answers
