"""The leaderboard as SPEC §4 JSON for `scores --json` and the API: scores, and what judging.scoring.trust adds."""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from judging.models import Campaign
from judging.scoring import trust
from judging.scoring.cache import Params, leaderboard, scores_clear
from judging.scoring.cube import cubes_clear


def leaderboard_data(
    *,
    campaign: Campaign,
    k: int = 10,
    gain: str = "linear",
    threshold: int = 1,
    judged_only: bool = False,
    policy: str | None = None,
    labels: str = "humans",
    per_query: bool = True,
    segment: str | None = None,
    measure: str | None = None,
    bounds: bool = True,
    attribute: str | None = None,
    micro: bool = False,
    _as_text: _PerQueryText | None = None,
) -> dict[str, Any]:
    """The SPEC §4 JSON shape shared by `scores --json` and the API.

    With ``bounds`` (the default) each system gains ``"bounds"`` and the top level ``"settled"`` for the
    systems adjacent in the ranking by ``measure`` (default nDCG@k); ``attribute`` adds ILD@k and
    Coverage@k over that document attribute, ``micro`` the micro-averaged P@k and R@k (see
    judging.scoring.trust). ``segment`` restricts the means to the queries carrying that tag.
    """
    params = Params(
        k=k,
        gain=gain,
        threshold=threshold,
        judged_only=judged_only,
        policy=policy,
        labels=labels or "humans",
        segment=segment,
    )
    lb = leaderboard(campaign, params)
    means = lb.means()
    names = lb.measures
    qids = lb.scored_qids()
    systems = []
    state = lb.state if per_query and _as_text is not None else ""
    for s, name in enumerate(lb.cube.system_names):
        entry = {"name": name, "measures": {m: float(means[i, s]) for i, m in enumerate(names)}}
        if per_query and _as_text is not None:

            def system_values(s: int = s) -> np.ndarray:
                return lb.table.scores[:, s][:, lb.table.labelled].T

            entry["per_query"] = _as_text.put(system_values, qids, names, block=f"{state}:{s}")
        elif per_query:
            values = lb.table.scores[:, s][:, lb.table.labelled].T.tolist()  # (Q_scored, M)
            entry["per_query"] = {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, values, strict=True)}
        systems.append(entry)
    data = {
        "campaign": campaign.slug,
        "k": k,
        "gain": gain,
        "threshold": threshold,
        "judged_only": judged_only,
        "policy": policy or campaign.aggregation,
        "labels": lb.params.labels,
        "queries": len(qids),
        "systems": systems,
    }
    if segment is not None:
        data["segment"] = segment
    if bounds or attribute or micro:
        trust.leaderboard_data_extend(
            lb, data, measure=measure, with_bounds=bounds, attribute=attribute, with_micro=micro, per_query=per_query
        )
    return data


# Per-query rows already written as JSON, by measure names and the row's float64 bytes: the same values
# give the same text, so after one new judgment only the rescored query's rows are formatted again.
_ROW_TEXT: dict[tuple[str, ...], dict[bytes, str]] = {}
_ROW_TEXT_MAX = 400_000
# Whole per-query objects already written, by the scores' state (Leaderboard.state: runs, parameters and
# every query's labels version) and system: a poll with nothing changed since the last one joins them
# instead of formatting 100,000 rows again. The last two states only (a lead's script polls one parameter
# set, the state moves with each judgment): 20 systems x 5,000 queries is 19 MB of text a state.
_BLOCK_TEXT: OrderedDict[str, str] = OrderedDict()
_BLOCK_TEXT_STATES = 2
_BLOCK_LOCK = threading.Lock()


def _block_text(block: str, make: Callable[[], str]) -> str:
    with _BLOCK_LOCK:
        text = _BLOCK_TEXT.get(block)
        if text is not None:
            _BLOCK_TEXT.move_to_end(block)
            return text
    text = make()
    state = block.rpartition(":")[0]
    with _BLOCK_LOCK:
        _BLOCK_TEXT[block] = text
        states = {b.rpartition(":")[0] for b in _BLOCK_TEXT}
        while len(states) > _BLOCK_TEXT_STATES:
            oldest = next(iter(_BLOCK_TEXT)).rpartition(":")[0]
            if oldest == state:
                break
            for b in [b for b in _BLOCK_TEXT if b.rpartition(":")[0] == oldest]:
                del _BLOCK_TEXT[b]
            states.discard(oldest)
    return text


class _PerQueryText:
    """Per-query values written straight to JSON text for leaderboard_json: a placeholder string stands in
    the data for each system's ``per_query`` object and is replaced by the text afterwards."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.parts: dict[str, str] = {}
        self.keys: tuple[tuple[str, ...], list[str]] | None = None

    def put(self, values: Callable[[], np.ndarray], qids: list[str], names: list[str], *, block: str) -> str:
        """A placeholder for the JSON object {qid: {name: value}} of ``values()`` (Q, M), the per-query
        block ``block`` names (the scores' state and the system): written once per state."""
        placeholder = f"per-query:{self.token}:{len(self.parts)}"
        self.parts[placeholder] = _block_text(block, lambda: self._text(values(), qids, names))
        return placeholder

    def _text(self, values: np.ndarray, qids: list[str], names: list[str]) -> str:
        values = np.ascontiguousarray(values, dtype=np.float64)
        if not np.isfinite(values).all():
            raise _NotFinite
        if self.keys is None or self.keys[0] != tuple(qids):
            self.keys = (tuple(qids), [json.dumps(q, ensure_ascii=False) + ":" for q in qids])
        texts = _ROW_TEXT.setdefault(tuple(names), {})
        if len(texts) > _ROW_TEXT_MAX:
            texts.clear()
        # {"P@10":%r,...}: repr writes a float exactly as json.dumps does.
        row_format = "{" + ",".join(json.dumps(n, ensure_ascii=False).replace("%", "%%") + ":%r" for n in names) + "}"
        rows = cast(
            "list[bytes]", values.view(np.dtype((np.void, values.shape[1] * 8))).ravel().tolist() if values.size else []
        )
        out = []
        for key_text, row_bytes, row in zip(self.keys[1], rows, values.tolist(), strict=True):
            text = texts.get(row_bytes)
            if text is None:
                text = texts[row_bytes] = row_format % tuple(row)
            out.append(key_text + text)
        return "{" + ",".join(out) + "}"

    def fill(self, text: str) -> str:
        """``text`` (JSON with the placeholders) with the per-query objects in their place, in one pass."""
        pieces = re.split(f'"(per-query:{self.token}:[0-9]+)"', text)
        pieces[1::2] = [self.parts[p] for p in pieces[1::2]]
        return "".join(pieces)


class _NotFinite(Exception):
    pass


def leaderboard_json(*, campaign: Campaign, **params: Any) -> str | None:
    """leaderboard_data(..., per_query=True) as the API's JSON text (compact, UTF-8, what DRF's JSONRenderer
    writes), or None where only the general path applies (no per-query values, the diversity measures,
    a value that is not finite). Building a dict per query and system and encoding them took seconds for
    20 systems x 5,000 queries; the per-query objects are written as text in one formatting step each."""
    if not params.get("per_query", True) or params.get("attribute"):
        return None
    as_text = _PerQueryText()
    try:
        data = leaderboard_data(campaign=campaign, **params, _as_text=as_text)
    except _NotFinite:
        return None
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # As DRF's JSONRenderer: U+2028/2029 are valid JSON but not valid JavaScript string literals.
    return as_text.fill(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def process_caches_clear() -> None:
    """Forget this process's run cubes, score tables and leaderboard texts, as a freshly started server
    process would not have them (the shared cache in Django's cache stays): for tests and benchmarks."""
    cubes_clear()
    scores_clear()
    with _BLOCK_LOCK:
        _BLOCK_TEXT.clear()
