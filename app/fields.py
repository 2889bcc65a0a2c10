"""Field views of long values: a string too long for one page is streamed, masked window by window.

The run page shows long values cut (app.previews) with a link to their field view.
For a string over FIELD_INLINE_CHARS the field view:

- as an htmx fragment (the page's "show all"), shows the first FIELD_INLINE_CHARS and a
  link to the whole value on its own page;
- as a page, streams the value inside the page, masked window by window
  (`Masker.iter_text`) and escaped;
- as JSON (`/api/…/field`), streams `{"…", "value": "…"}` the same way.

Loading a step's record to find the value reads all of it: large records (those with
a preview, over 256 KiB) are loaded by one request at a time (`gate_for`), so ten
readers of a 60 MB value hold one copy in memory, not ten.
"""

from __future__ import annotations

import html
import secrets as _random
import threading
from typing import Any, Callable, Iterator, Optional

import orjson
from fastapi import Request
from fastapi.responses import StreamingResponse

from .queries.run_detail import record_is_large
from .render import is_htmx, respond, wants_json
from .secrets import Masker, cut_point, is_secret_key

#: Longest string value answered in one piece; longer ones stream.
FIELD_INLINE_CHARS = 256 * 1024
_BIG_RECORDS = threading.BoundedSemaphore(1)
#: How long a field lookup waits for the large-record gate before answering 503: a reader
#: that never finishes (a stalled stream) must not hold every later lookup's thread.
GATE_WAIT_S = 10.0


class _NoGate:
    def acquire(self, timeout: Optional[float] = None) -> bool:
        return True

    def release(self) -> None:
        pass


def gate_for(session, *, run_pk: int, step: Optional[int], event: Optional[int]):
    """The semaphore a field lookup takes: one at a time for large step records, none otherwise."""
    if step is None or not record_is_large(session, run_pk=run_pk, step=step, event=event):
        return _NoGate()
    return _BIG_RECORDS


def is_long(value: Any) -> bool:
    return isinstance(value, str) and len(value) > FIELD_INLINE_CHARS


def _chunks(request: Request, value: str, key_path: list[Any]) -> Iterator[str]:
    from .security import reveal_state

    masker = Masker(detect=not reveal_state(request).shown)
    if masker.detect and any(is_secret_key(t) for t in key_path):
        yield masker.at(value, key_path)
        return
    yield from masker.iter_text(value)


class _ReleasingResponse(StreamingResponse):
    """A stream that gives the gate back however it ends: a generator the server never
    started (the client gone before the first byte) never runs its own `finally`."""

    def __init__(self, *args: Any, release: Callable[[], None], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def once(release: Callable[[], None]) -> Callable[[], None]:
    """`release` made safe to call from every path that may end a lookup (the first call wins)."""
    token = [None]

    def release_once() -> None:
        try:
            token.pop()  # atomic: of two racing calls, one finds the list empty
        except IndexError:
            return
        release()

    return release_once


def respond_long(request: Request, data: dict[str, Any], key_path: list[Any], *, release: Callable[[], None]):
    """Answer with a long string value: cut (htmx), or streamed (page, JSON). Calls `release`
    when done: at once for the cut, else when the stream ends, however it ends (`once` makes a
    second call from the caller's own error path harmless)."""
    value: str = data["value"]
    if is_htmx(request) and not wants_json(request):
        release()
        head = value[:cut_point(value, 0, FIELD_INLINE_CHARS)]
        return respond(request, "field.html", {**data, "value": head, "more": {"chars": len(value)}},
                       fragment="_field.html", value_path=("value", key_path))
    chunks = _chunks(request, value, key_path)
    if wants_json(request):
        mark = "qita-" + _random.token_hex(8)
        before, after = orjson.dumps({**data, "value": mark}).split(orjson.dumps(mark), 1)

        def body() -> Iterator[bytes]:
            yield before + b'"'
            for chunk in chunks:
                yield orjson.dumps(chunk)[1:-1]
            yield b'"' + after

        return _ReleasingResponse(body(), media_type="application/json", release=release)
    mark = "qita" + _random.token_hex(8)
    page = respond(request, "field.html", {**data, "value": mark, "more": {"chars": len(value), "streamed": True}},
                   value_path=("value", []))
    head, tail = bytes(page.body).decode().split(mark, 1)

    def page_body() -> Iterator[str]:
        yield head
        for chunk in chunks:
            yield html.escape(chunk, quote=False)
        yield tail

    headers = {k: v for k, v in page.headers.items() if k.lower() not in ("content-length", "content-type")}
    return _ReleasingResponse(page_body(), media_type="text/html; charset=utf-8", headers=headers,
                              status_code=page.status_code, release=release)
