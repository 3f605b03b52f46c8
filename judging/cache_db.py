"""Django's database cache, with ``set_many`` as one statement.

The leaderboard writes its per-query score blocks to the shared cache (judging.scoring.cache): one block after
a judgment, but every block on a cold start, 313 of them at 5,000 queries. Django's database cache writes
each key with four statements (a count of the whole table for its cull, a read of the key, then an insert or
an update): 1,252 round trips, about 0.4 s of a cold `scores --json` on PostgreSQL. Here a batch (or one key's
``set``) is written by one ``INSERT ... ON CONFLICT (cache_key) DO UPDATE`` (PostgreSQL, and SQLite from 3.24),
with the values pickled and encoded exactly as Django does, so Django's own ``get``/``get_many`` read them; the
table is counted for its cull once every CULL_EVERY writes, or sooner once what this backend wrote since its last
count would pass MAX_ENTRIES (a count reads every row of the table, up to MAX_ENTRIES of them, issue 45). Every
other method is Django's.
"""

from __future__ import annotations

import base64
import pickle
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router, transaction
from django.utils.timezone import now as tz_now

#: Writes between two counts of the table for its cull (one count per write read the whole table: 20,000 rows at
#: MAX_ENTRIES, after every judgment that rescored a query). Between counts this backend adds what it wrote to the
#: last count and counts again as soon as that passes MAX_ENTRIES, so the table passes its bound by at most what
#: the other writers wrote meanwhile.
CULL_EVERY = 50


class BatchedDatabaseCache(DatabaseCache):
    """DatabaseCache whose ``set`` and ``set_many`` write their keys in one upsert, and count the table for its
    cull once every CULL_EVERY writes (see the module docstring)."""

    _counted: int | None = None  # entries at this backend's last count plus what it wrote since (None: not yet)
    _writes = 0  # writes since that count

    def clear(self) -> None:
        super().clear()
        self._counted, self._writes = None, 0  # counted again at the next write

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> None:
        self.set_many({key: value}, timeout=timeout, version=version)

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> list[Any]:
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        if connection.vendor not in ("postgresql", "sqlite") or not data:
            return super().set_many(data, timeout=timeout, version=version)
        backend_timeout = self.get_backend_timeout(timeout)
        if backend_timeout is None:
            until = datetime.max
        else:
            until = datetime.fromtimestamp(backend_timeout, tz=UTC if settings.USE_TZ else None)
        expires = connection.ops.adapt_datetimefield_value(until.replace(microsecond=0))
        rows = []
        for key, value in data.items():
            encoded = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
            rows.append((self.make_and_validate_key(key, version=version), encoded, expires))
        quote = connection.ops.quote_name
        table = quote(self._table)  # type: ignore[attr-defined]  # BaseDatabaseCache's, untyped
        key_col, value_col, expires_col = quote("cache_key"), quote("value"), quote("expires")
        with transaction.atomic(using=db), connection.cursor() as cursor:
            known = self._counted
            if known is None or self._writes >= CULL_EVERY or known + len(rows) > self._max_entries:
                cursor.execute(f"SELECT COUNT(*) FROM {table}")
                count = cursor.fetchone()[0]
                if count + len(rows) > self._max_entries:
                    self._cull(db, cursor, tz_now().replace(microsecond=0), count + len(rows))  # type: ignore[attr-defined]
                    cursor.execute(f"SELECT COUNT(*) FROM {table}")
                    count = cursor.fetchone()[0]
                self._counted, self._writes = count + len(rows), 0
            else:
                self._counted, self._writes = known + len(rows), self._writes + 1
            for start in range(0, len(rows), _ROWS_PER_STATEMENT):
                chunk = rows[start : start + _ROWS_PER_STATEMENT]
                cursor.execute(
                    f"INSERT INTO {table} ({key_col}, {value_col}, {expires_col}) "
                    f"VALUES {', '.join(['(%s, %s, %s)'] * len(chunk))} "
                    f"ON CONFLICT ({key_col}) DO UPDATE SET {value_col} = EXCLUDED.{value_col}, "
                    f"{expires_col} = EXCLUDED.{expires_col}",
                    [v for row in chunk for v in row],
                )
        return []


_ROWS_PER_STATEMENT = 500  # 1,500 parameters a statement, well within SQLite's limit
