"""Seeded databases kept as page images, so a reset to a seed seen before is one copy.

A reset that deletes every row and inserts the seed's fixture through SQLAlchemy costs
5-11 ms of CPU; SQLite's online backup of the same file into and out of an in-memory
database costs about 0.3 ms, and it restores the file page for page (schema, free list
and all), so the state is exactly the one the first reset built. SQLAlchemy has no such
operation; the backup API is the sqlite3 module's own.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict

from sqlalchemy import Connection, Engine

#: Seeds kept per service process: a sweep's seeds are its innermost loop (20 in the full
#: factorial), and one image is 70-150 KB.
KEEP = 32


class PristineStates:
    """The seeded state of the last `KEEP` seeds, LRU. Anything else stored in the file
    (the service's persisted configuration) must not change while images are kept: the
    caller clears them when it does."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._images: OrderedDict[int, sqlite3.Connection] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._images)

    def restore(self, seed: int, engine: Engine) -> bool:
        """Copy the seed's image over the live database; False when it is not kept."""
        with self._lock:
            image = self._images.get(seed)
            if image is None:
                return False
            self._images.move_to_end(seed)
            with engine.connect() as conn:
                image.backup(_raw(conn))
        return True

    def save(self, seed: int, engine: Engine) -> None:
        """Keep the live database (just seeded) as the seed's image."""
        image = sqlite3.connect(":memory:", check_same_thread=False)
        with engine.connect() as conn:
            _raw(conn).backup(image)
        with self._lock:
            self._images[seed] = image
            while len(self._images) > self.keep:
                _, old = self._images.popitem(last=False)
                old.close()

    def clear(self) -> None:
        with self._lock:
            for image in self._images.values():
                image.close()
            self._images.clear()


def _raw(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw
