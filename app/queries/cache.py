"""What is kept until the data changes: figures of the whole store and of one run.

The list page's figures (count, pass rate, medians, top reasons) and the filter menus
scan the whole filtered set; at 100,000 runs that is far over the page's budget. They
only change when the runs change, so they are cached per (database, filters, data
version). The data version is read from the database itself (newest `updated_at`
through its index, and the row count), so a write by another process sharing the
same PostgreSQL invalidates the cache as surely as one by this board's writer.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session

from ..models import RUNS

_CACHE: "OrderedDict[tuple, Any]" = OrderedDict()
_CACHE_MAX = 256
_CACHE_LOCK = threading.Lock()


def data_version(session: Session) -> tuple:
    """What moves whenever any run is added or changes: the newest `updated_at` and the run count."""
    # Read once per session (one request): the list page asks for three cached values.
    version = session.info.get("qita_data_version")
    if version is None:
        newest = session.execute(select(func.max(RUNS.c.updated_at))).scalar()
        count = session.execute(select(func.count()).select_from(RUNS)).scalar_one()
        version = session.info["qita_data_version"] = (newest, count)
    return version



def _memo(key: tuple, compute: Any, *, shared: bool = False) -> Any:
    """`compute()` once per key. A copy is returned unless `shared`: the caller then
    promises not to change what it gets (a 10,000-pair comparison is too big to copy)."""
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key] if shared else copy.deepcopy(_CACHE[key])  # callers may change what they get
    value = compute()
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return value if shared else copy.deepcopy(value)


def clear() -> None:
    """Forget every cached figure (benchmarks measure cold pages)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _cached(session: Session, key: tuple, compute: Any, *, shared: bool = False) -> Any:
    bind = session.get_bind()
    return _memo((id(bind), str(bind.url), *key, data_version(session)), compute, shared=shared)


def data_cached(session: Session, *, key: tuple, compute: Any) -> Any:
    """A figure of the whole store kept until any run changes (the data version moves),
    shared with every caller: they must not change it."""
    return _cached(session, key, compute, shared=True)


def store_cached(session: Session, *, key: tuple, compute: Any) -> Any:
    """A figure over the whole store (the experiments overview, the runs list's figures),
    kept until the data changes; each caller gets its own copy."""
    return _cached(session, key, compute)


def run_cached(session: Session, *, run_pk: int, updated_at: Any, name: str, compute: Any) -> Any:
    """A per-run figure (verdict lane, events without a step) kept until the run changes.

    Every write to a run moves its `updated_at`, so (run, updated_at) names one state of
    it; a long run's page then does not redo whole-run queries on every view.
    """
    bind = session.get_bind()
    return _memo((id(bind), str(bind.url), "run", run_pk, str(updated_at), name), compute)

