"""Before/after evidence for the list page: times each list query in-process on a built database.

    python -m bench.profile_list /tmp/qita-bench/server-100000-10000-1000.db [--before old_queries.py]

`--before` loads another version of app/queries/run_list.py (e.g. `git show 7f08a61:app/queries.py`)
so both can be timed on the same database; `--profile` prints a pyinstrument profile
of one uncached list request.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any, Optional

from sqlmodel import Session

from .common import percentile


def _load(path: Optional[Path]) -> Any:
    if path is None:
        from qita_board.queries import run_list

        return run_list
    spec = importlib.util.spec_from_file_location("app._queries_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def page(mod: Any, session: Session, **kw: Any) -> None:
    """What the list page asks of the runs-list queries for one request."""
    f = mod.RunFilters(**kw)
    mod.list_runs(session, filters=f)
    mod.run_stats(session, filters=f)
    mod.facet_values(session)


CASES = {"first page": {}, "filtered": {"experiment": "exp-001", "verdict": "fail"}, "search": {"q": "task-00042"},
         "deep page": {"offset": -50}}


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--before", type=Path)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    from qita_board.db import make_engine

    engine = make_engine(f"sqlite:///{a.db}")
    for label, path in (("before", a.before), ("after", None)):
        if label == "before" and path is None:
            continue
        q = _load(path)
        with Session(engine) as s:
            runs = q.list_runs(s, filters=q.RunFilters(limit=1))[1]
        for name, kw in CASES.items():
            kw = {**kw, "offset": runs + kw["offset"]} if "offset" in kw else kw
            times = []
            for _ in range(a.n):
                t = time.perf_counter()
                with Session(engine) as s:  # one session per request, as the board does
                    page(q, s, **kw)
                times.append((time.perf_counter() - t) * 1000)
            print(f"{label:<7} {name:<11} {runs:>7} runs  first {times[0]:7.1f} ms  p50 {percentile(times, 50):7.1f} ms")
    if a.profile:
        from pyinstrument import Profiler

        q = _load(a.before)
        with Session(engine) as s:
            p = Profiler(interval=0.0005)
            p.start()
            page(q, s, offset=max(0, q.list_runs(s, filters=q.RunFilters(limit=1))[1] - 50))
            p.stop()
        print(p.output_text(unicode=False, color=False))


if __name__ == "__main__":
    main()
