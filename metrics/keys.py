"""One integer per (query, document) pair: ``query_id << 32 | document_id``, with the bound that makes it one.

A pair's key packs the document's id into the low 32 bits of an int64 and the query's above them, so that sorted
keys are the pairs ordered by query, then document, and a pair is found with ``np.searchsorted``. The packing is
exact and ordered only while the document id lies in [0, 2**32 - 1] (:data:`DOCUMENT_ID_MAX`) and the query id
in [0, 2**31 - 1] (:data:`QUERY_ID_MAX`: the key is a signed int64, and a query id of 2**31 would make it
negative, sorted before every other). The ids are 64-bit database keys, so a bigger one would silently collide
with another pair (a document id of 2**32 reads as the next query's document 0). Every key is made here, and an
id out of range is a broken invariant: an ``OverflowError`` (an ``ArithmeticError``, as
:class:`metrics.numbers.NumberError`, never a ``ValueError`` that a handler of bad arguments would take for the
user's) naming the id, not a wrong answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from metrics._types import IntArray

__all__ = ["DOCUMENT_ID_MAX", "QUERY_ID_MAX", "pair_key", "pair_key_query", "pair_keys"]

DOCUMENT_BITS = 32
DOCUMENT_ID_MAX = 2**DOCUMENT_BITS - 1  # the largest document id a key holds
QUERY_ID_MAX = 2 ** (63 - DOCUMENT_BITS) - 1  # the largest query id: its key still a positive int64


def _refuse(kind: str, value: int, most: int) -> OverflowError:
    return OverflowError(f"{kind} id {value} does not fit in a pair key (0 to {most})")


def pair_key(query_id: int, document_id: int) -> int:
    """The key ``query_id << 32 | document_id`` of one pair; OverflowError when an id is out of its range
    (:data:`QUERY_ID_MAX`, :data:`DOCUMENT_ID_MAX`)."""
    if not 0 <= query_id <= QUERY_ID_MAX:
        raise _refuse("query", query_id, QUERY_ID_MAX)
    if not 0 <= document_id <= DOCUMENT_ID_MAX:
        raise _refuse("document", document_id, DOCUMENT_ID_MAX)
    return (query_id << DOCUMENT_BITS) | document_id


def _checked(kind: str, ids: npt.ArrayLike, most: int) -> npt.NDArray[np.int64]:
    arr = np.asarray(ids)
    if arr.dtype != np.int64:
        if arr.size and arr.dtype.kind == "u" and int(arr.max()) > most:  # before a cast could wrap it
            raise _refuse(kind, int(arr.max()), most)
        arr = arr.astype(np.int64)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())  # two reductions, no temporary
        if low < 0:
            raise _refuse(kind, low, most)
        if high > most:
            raise _refuse(kind, high, most)
    return arr


def pair_keys(query_ids: npt.ArrayLike, document_ids: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The keys of pairs (int64, the two arrays' broadcast shape), as :func:`pair_key` makes one.

    Parameters
    ----------
    query_ids, document_ids : integer arrays (or scalars) of any shapes that broadcast together
        Cast to int64 (never shifted in a narrower type, where ``<< 32`` would drop the query).

    Raises
    ------
    OverflowError
        When an id is negative or above its maximum (:data:`QUERY_ID_MAX`, :data:`DOCUMENT_ID_MAX`), naming the
        array's most extreme value.
    """
    q = _checked("query", query_ids, QUERY_ID_MAX)
    d = _checked("document", document_ids, DOCUMENT_ID_MAX)
    keys: npt.NDArray[np.int64] = np.bitwise_or(np.left_shift(q, DOCUMENT_BITS), d)
    return keys


def pair_key_query(keys: IntArray | Any) -> npt.NDArray[np.int64]:
    """The query ids of pair keys (the inverse of :func:`pair_keys` for the high half)."""
    out: npt.NDArray[np.int64] = np.right_shift(np.asarray(keys, dtype=np.int64), DOCUMENT_BITS)
    return out
