"""metrics.keys: one pair key per (query id, document id), refused when an id does not fit in its bits (a
document id in 32, a query id in the 31 above them that keep the int64 key positive and sorted)."""

from __future__ import annotations

import numpy as np
import pytest

from metrics import DOCUMENT_ID_MAX, QUERY_ID_MAX, pair_key, pair_key_query, pair_keys


def test_pair_key_packs_query_high_and_document_low():
    assert pair_key(7, 1) == 7 * 2**32 + 1
    assert pair_key(0, 0) == 0
    assert pair_key(1, 0) == 2**32


@pytest.mark.parametrize(
    ("query", "document"), [(QUERY_ID_MAX, 0), (0, DOCUMENT_ID_MAX), (QUERY_ID_MAX, DOCUMENT_ID_MAX)]
)
def test_pair_key_the_largest_ids_fit(query, document):
    assert (DOCUMENT_ID_MAX, QUERY_ID_MAX) == (2**32 - 1, 2**31 - 1)
    key = pair_key(query, document)
    assert key >> 32 == query and key & DOCUMENT_ID_MAX == document
    assert pair_keys(np.array([query]), np.array([document])).tolist() == [key]
    assert 0 <= key <= np.iinfo(np.int64).max  # a positive int64 holds it


@pytest.mark.parametrize(
    ("query", "document", "message"),
    [
        (0, 2**32, r"document id 4294967296 does not fit in a pair key \(0 to 4294967295\)"),
        (2**31, 0, r"query id 2147483648 does not fit in a pair key \(0 to 2147483647\)"),
        (2**32, 0, "query id 4294967296 does not fit"),
        (-1, 0, "query id -1 does not fit"),
        (0, -1, "document id -1 does not fit"),
        (2**40, 5, "query id 1099511627776 does not fit"),
    ],
)
def test_pair_key_an_id_past_32_bits_is_refused(query, document, message):
    with pytest.raises(OverflowError, match=message):
        pair_key(query, document)
    with pytest.raises(OverflowError, match=message):
        pair_keys(np.array([1, query]), np.array([2, document]))


def test_pair_keys_names_the_extreme_id_of_an_array():
    with pytest.raises(OverflowError, match="^document id 8589934592 does not fit"):
        pair_keys(np.array([1, 1, 1]), np.array([3, 2**33, 2**32]))


def test_pair_keys_is_not_a_value_error():
    # a broken invariant, never taken for a user's bad argument by a handler of ValueError
    assert not issubclass(OverflowError, ValueError)


def test_pair_keys_refuse_unsigned_ids_a_cast_would_wrap():
    with pytest.raises(OverflowError, match="document id 18446744073709551615 does not fit"):
        pair_keys(np.array([1]), np.array([2**64 - 1], dtype=np.uint64))


def test_pair_keys_sort_as_query_then_document():
    rng = np.random.default_rng(3)
    q = rng.integers(0, 2**31, 5_000, dtype=np.int64)
    q[:50] = QUERY_ID_MAX
    q[200:250] = 0
    d = rng.integers(0, 2**32, 5_000, dtype=np.int64)
    d[50:100] = DOCUMENT_ID_MAX
    d[100:150] = 0
    keys = pair_keys(q, d)
    assert keys.dtype == np.int64
    # the same values as the formula written out before, so the sorted keys of stored caches still match
    np.testing.assert_array_equal(keys, (q << 32) | d)
    np.testing.assert_array_equal(np.argsort(keys, kind="stable"), np.lexsort((d, q)))
    np.testing.assert_array_equal(pair_key_query(keys), q)
    assert [pair_key(int(a), int(b)) for a, b in zip(q[:20], d[:20], strict=True)] == keys[:20].tolist()


def test_pair_keys_broadcasts_and_widens_narrow_ids():
    q = np.array([3, 4], dtype=np.int32)
    d = np.array([[1], [2], [DOCUMENT_ID_MAX]], dtype=np.uint32)
    keys = pair_keys(q[None, :], d)
    assert keys.shape == (3, 2) and keys.dtype == np.int64
    assert keys[2, 1] == pair_key(4, DOCUMENT_ID_MAX)  # an int32 query shifted by 32 in int32 would lose it
    assert pair_keys(np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)
