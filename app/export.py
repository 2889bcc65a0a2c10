"""Exports of one run: a standalone HTML file and the run's records as v1 JSONL.

Both stream: a run of any length is written block by block, never held whole. Both go
through one function each (`render_export_html`, `export_jsonl`) so a filter applied to
exported data (e.g. secret masking) has a single place to hook in.

The HTML file opens from disk with no server: its stylesheet is inlined, it carries no
script and no link to anything but its own anchors, and every value is shown whole
(expanders are plain <details>) since there is no server to load the rest from.
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import quote

import orjson
from sqlalchemy.engine import Engine
from sqlmodel import Session

from . import queries
from .paths import STATIC
from .settings import Settings

#: Steps rendered per block while streaming the HTML export.
EXPORT_BLOCK = 200


def disposition(run_id: str, ext: str) -> str:
    """A Content-Disposition that saves as `<run id>.<ext>` (any Unicode id, RFC 5987)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)[:120].strip(".") or "run"
    return f"attachment; filename=\"{safe}.{ext}\"; filename*=UTF-8''{quote(run_id[:120], safe='')}.{ext}"


def _stylesheet() -> str:
    return (STATIC / "app.css").read_text(encoding="utf-8")


def render_export_html(engine: Engine, run_id: str, *, templates: Any, settings: Settings) -> Iterator[str]:
    """The standalone HTML of a run, as chunks of text."""
    from .routes.runs import load_run

    with Session(engine) as session:
        data = load_run(session, run_id)
        pk = data.pop("_pk")
        total = data["lane"]["steps"]

        def blocks() -> Iterator[list[dict[str, Any]]]:
            for offset in range(0, total, EXPORT_BLOCK):
                steps, _ = queries.get_steps(session, run_pk=pk, offset=offset, limit=EXPORT_BLOCK)
                if not steps:
                    return
                yield steps

        template = templates.get_template("export.html")
        yield from template.generate(data=data, blocks=blocks(), steps_total=total, css=_stylesheet(),
                                     export=True, settings=settings, request=None)


def export_jsonl(engine: Engine, run_id: str) -> Iterator[bytes]:
    """The run's records in the v1 format, one JSON object per line."""
    with Session(engine) as session:
        row = queries.run_live_stamp(session, run_id=run_id)
        if row is None:
            return
        for rec in queries.export_records(session, run_pk=row["pk"]):
            yield orjson.dumps(rec, option=orjson.OPT_NON_STR_KEYS) + b"\n"
