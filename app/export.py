"""Exports of one run: a standalone HTML file and the run's records as v1 JSONL.

Both stream: a run of any length is written block by block, never held whole. Both go
through one function each (`render_export_html`, `export_jsonl`), and both mask secrets
(`app.secrets.mask_data`) unless the request may and does ask for them raw
(`reveal_for`: `?reveal=secrets` with the token, or the board's show_secrets setting).

JSONL lines are encoded by orjson, which refuses data nested more than ~254 levels;
ingest accepts 1024, so such records go through `dumps_deep`, an iterative encoder
with no depth limit: every record is exported, never a stream cut short.

The HTML file opens from disk with no server: its stylesheet is inlined, it carries no
script and no link to anything but its own anchors, and every value is shown whole
(expanders are plain <details>) since there is no server to load the rest from.
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import quote

import orjson
from markupsafe import Markup
from sqlalchemy.engine import Engine
from sqlmodel import Session

from .errors import BoardError
from .jsontext import dumps_deep
from .paths import STATIC
from .queries import live, run_detail, run_export
from .run_view import run_header
from .secrets import mask_data
from .settings import Settings

#: Steps rendered per block while streaming the HTML export.
EXPORT_BLOCK = 200


def disposition(name: str, ext: str, *, fallback: str = "run") -> str:
    """A Content-Disposition that saves as `<name>.<ext>` (any Unicode name: a run id, an
    experiment's variants; RFC 6266/5987).

    Header values travel as latin-1 (a name with a letter outside it made the response
    fail with a 500), so the plain `filename` is ASCII only (other characters become
    `_`); browsers use `filename*`, the name percent-encoded as UTF-8.
    """
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in name)[:120].strip(".") or fallback
    # Browsers drop a name's leading dots and spaces from `filename*` too: ".." saved as a
    # file called "html", with no name and no extension.
    whole = name[:120].strip(". ") or fallback
    return f"attachment; filename=\"{safe}.{ext}\"; filename*=UTF-8''{quote(whole, safe='')}.{ext}"


def reveal_for(request: Any) -> bool:
    """Whether this export shows secrets raw; asking for them without the token is refused (401)."""
    from .security import reveal_state

    state = reveal_state(request)
    if request.query_params.get("reveal") == "secrets" and not state.shown:
        raise BoardError("showing secrets in an export needs the board's token: sign in at /login first", status=401)
    return state.shown


def _stylesheet() -> Markup:
    # The board's own stylesheet (never trace data), inlined so the file needs no server.
    return Markup((STATIC / "app.css").read_text(encoding="utf-8").replace("</", "<\\/"))


def render_export_html(engine: Engine, run_id: str, *, templates: Any, settings: Settings,
                       reveal: bool = False) -> Iterator[str]:
    """The standalone HTML of a run, as chunks of text (secrets masked unless `reveal`)."""
    with Session(engine) as session:
        row = run_detail.get_run_row(session, run_id=run_id)
        if row is None:  # removed since the route looked it up
            return
        data = run_header(session, row=row)
        pk = data.pop("_pk")
        data.pop("_updated_at")
        total = data["lane"]["steps"]

        if not reveal:
            data = mask_data(data)

        def blocks() -> Iterator[list[dict[str, Any]]]:
            for offset in range(0, total, EXPORT_BLOCK):
                steps, _ = run_detail.get_steps(session, run_pk=pk, offset=offset, limit=EXPORT_BLOCK)
                if not steps:
                    return
                yield steps if reveal else mask_data(steps)

        template = templates.get_template("export.html")
        yield from template.generate(data=data, blocks=blocks(), steps_total=total, css=_stylesheet(),
                                     export=True, settings=settings, request=None)


def export_jsonl(engine: Engine, run_id: str, *, reveal: bool = False) -> Iterator[bytes]:
    """The run's records in the v1 format, one JSON object per line (secrets masked unless `reveal`)."""
    with Session(engine) as session:
        row = live.find_run(session, run_id=run_id)
        if row is None:  # removed since the route looked it up
            return
        for rec in run_export.export_records(session, run_pk=row["pk"]):
            yield dumps_line(rec if reveal else mask_data(rec))


def dumps_line(rec: Any) -> bytes:
    """One JSONL line: orjson, or `dumps_deep` for what orjson cannot encode (deep nesting)."""
    try:
        return orjson.dumps(rec, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return dumps_deep(rec).encode() + b"\n"


