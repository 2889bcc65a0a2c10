"""One response path for every page: full HTML, an htmx fragment, or the JSON twin.

A handler builds one data dict and calls `respond`. Requests under `/api/` (or with
`?format=json`) get that dict as JSON; htmx requests get only the named fragment
template; everyone else gets the full page. So the JSON the tests assert on and the
HTML a person reads come from the same code.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional
from urllib.parse import quote_plus, urlencode

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from . import jsontext, present, walk, words
from .compare_flags import FLAG_LABELS
from .paths import TEMPLATES
from .queries.pointers import make_pointer
from .secrets import PAGE_MAX_CHARS, Masker
from .urls import encode_run_id, run_path


class JSONResponse(Response):
    """JSON via orjson (datetimes as ISO strings), at any depth (app.jsontext)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return jsontext.dumps(content)


@lru_cache(maxsize=1)
def make_templates() -> Jinja2Templates:
    """The Jinja environment: autoescape on, the formatting filters registered.

    One per process: it holds nothing of any one app, and compiling every template takes
    ~1.2 s (measured), which each `create_app` paid again (the test suite builds an app per
    test). Templates are not reloaded when their files change: a board whose checkout was
    updated under it went on with its old code and the new templates, and every early-stopped
    run page answered 500 until it was restarted (seen in a review). Restart to upgrade."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    env = templates.env
    env.auto_reload = False
    env.autoescape = True
    env.finalize = words.contain_bidi  # before any template compiles: it is compiled in
    env.filters.update(
        int=present.fmt_int,
        bytes=present.fmt_bytes,
        score=present.fmt_score,
        num=present.fmt_num,
        duration=present.fmt_duration,
        pct=present.fmt_pct,
        whole=present.fmt_whole,
        usd=present.fmt_usd,
        dt=present.fmt_dt,
        iso=present.fmt_iso,
        json=present.to_json_text,
        rid=encode_run_id,
        plural=words.plural,
        verbatim=words.verbatim,
    )
    env.globals.update(
        stop_reason_info=present.stop_reason_info,
        criterion_evidence=present.criterion_evidence,
        run_setup=present.run_setup,
        lane_mark=present.lane_mark,
        gated_on_labels=present.GATED_ON_LABELS,
        step_summary=walk.summary,
        walk_labels=walk.KIND_LABELS,
        walk_union=walk.union,
        early_stop_reason_labels=present.EARLY_STOP_REASON_LABELS,
        zoneless_sources=present.ZONELESS_SOURCES,
        flag_labels=FLAG_LABELS,
        gauge=present.gauge,
        suggested_pair=present.suggested_pair,
        truncate=present.truncate,
        urlencode=query_string,
        run_url=run_path,
        ptr=make_pointer,
    )
    # Compiled now rather than on each page's first view: the compare page and its
    # partials took a few hundred ms to compile, which every first visitor paid.
    for name in env.list_templates(extensions=["html"]):
        env.get_template(name)
    return templates


@lru_cache(maxsize=16384)
def _quote(value: str) -> str:
    return quote_plus(value)


def query_string(params: dict[str, Any]) -> str:
    """`urlencode(params, doseq=True)`; string values quoted through a cache, since tables
    link the same run ids on every row and every view (the compare page has 1,000 rows)."""
    if isinstance(params, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
        return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in params.items())
    return urlencode(params, doseq=True)


def past_end(request: Request, *, offset: int, total: int, limit: Optional[int], what: str,
             query: Optional[list[tuple[str, Any]]] = None) -> Optional[Response]:
    """For a page whose `offset` is at or past the end of its `total` rows (an old link, rows
    removed since, a hand-edited address): a redirect to its last page, or, asked for JSON, a
    404 naming the last page's offset; None when the offset is on a page. `what` names the
    rows counted ("8 pairs"); `query` is the address's parameters (default: as asked)."""
    from .errors import BoardError

    if not offset or offset < total:
        return None
    last = (total - 1) // limit * limit if (total and limit) else 0
    if wants_json(request):
        raise BoardError(f"offset {offset} is past the end: {what} (the last page starts at offset {last})",
                         status=404, details={"count": total, "last_offset": last})
    # the offset keeps its place in the address (the runs list's links write it before `limit`)
    params = [(k, last if k == "offset" else v) for k, v in (request.query_params.multi_items() if query is None else query)
              if k != "offset" or last]
    encoded = urlencode(params)
    return RedirectResponse(request.url.path + ("?" + encoded if encoded else ""), status_code=303)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.query_params.get("format") == "json"


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true" and request.headers.get("hx-history-restore-request") != "true"


def respond(request: Request, template: str, data: dict[str, Any], *, fragment: Optional[str] = None,
            context: Optional[dict[str, Any]] = None, status_code: int = 200,
            value_path: Optional[tuple[str, list[Any]]] = None) -> Response:
    """Answer with JSON, the htmx fragment, or the full page, from the same data.

    `value_path` = (name, key path): `data[name]` is a value taken out of a record at that
    path (a field view), masked as it would be inside the record (`Masker.at`).
    """
    from .security import reveal_state

    # Secrets in trace data are masked here, once, for every page, fragment and JSON twin.
    reveal = reveal_state(request)
    # Shown raw, long values are still cut: a page never carries more than PAGE_MAX_CHARS
    # of one value (the field view streams the whole of it).
    masker = Masker(max_chars=PAGE_MAX_CHARS, detect=not reveal.shown)
    if value_path is not None:
        name, path = value_path
        data = {**data, name: masker.at(data[name], path)}
    data = masker.data(data)
    context = masker.data(context) if context else context
    if wants_json(request):
        return JSONResponse(data, status_code=status_code)
    templates: Jinja2Templates = request.app.state.templates
    ctx = {"request": request, "data": data, "settings": request.app.state.settings, **(context or {}),
           "secrets": {"shown": reveal.shown, "masked": masker.count, "reveal_url": reveal.reveal_url,
                       "hide_url": reveal.hide_url, "forced": reveal.forced}}
    name = fragment if (fragment and is_htmx(request)) else template
    response = templates.TemplateResponse(request, name, ctx, status_code=status_code)
    response.headers["Vary"] = "HX-Request"
    return response
