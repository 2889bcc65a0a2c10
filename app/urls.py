"""Run ids in URLs: any Unicode string travels as one percent-encoded path segment.

Starlette decodes the path before routing, so a run id holding `/` would split into
two segments. `RawPathMiddleware` routes on the raw (still encoded) path instead and
the `runid` convertor decodes the one segment. Ids that a browser would rewrite as
dot segments (`.`, `..`) or that start with `~~` travel as `~~` + base64url.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.convertors import Convertor, register_url_convertor

B64_PREFIX = "~~"


def encode_run_id(run_id: str) -> str:
    """The URL path segment for a run id."""
    if run_id in (".", "..") or run_id.startswith(B64_PREFIX) or run_id.strip(".") == "":
        return B64_PREFIX + base64.urlsafe_b64encode(run_id.encode("utf-8")).decode("ascii").rstrip("=")
    return quote(run_id, safe="")


def run_path(run_id: str, suffix: str = "") -> str:
    """The path of a run's page (or of `suffix` under it): every link to a run is made here."""
    return f"/runs/{encode_run_id(run_id)}{suffix}"


def decode_run_id(segment: str) -> str:
    """The run id in a URL path segment (inverse of encode_run_id; plain percent-encoding works too)."""
    if segment.startswith(B64_PREFIX):
        body = segment[len(B64_PREFIX):]
        try:
            # Strict: the lenient decoder drops characters outside the alphabet, so `~~!!!`
            # read as the empty id. A body that is not this encoding is a literal id.
            decoded = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True).decode("utf-8")
            if encode_run_id(decoded) == segment:
                return decoded
        except (binascii.Error, UnicodeDecodeError, ValueError):
            pass
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        return segment


class RunIdConvertor(Convertor):
    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return decode_run_id(value)

    def to_string(self, value: str) -> str:
        return encode_run_id(value)


register_url_convertor("runid", RunIdConvertor())


class RawPathMiddleware:
    """Route on the raw path so an encoded `/` inside a run id stays inside its segment."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("raw_path"):
            try:
                raw = scope["raw_path"].decode("ascii")
            except UnicodeDecodeError:
                raw = quote(scope["raw_path"].decode("utf-8", errors="replace"), safe="/%")
            if raw.startswith(("/runs/", "/api/runs/", "/pair/", "/api/pair/")):
                scope = dict(scope)
                scope["path"] = raw
        await self.app(scope, receive, send)


def masked_query(params: dict[str, Any], *, doseq: bool = False) -> str:
    """A query string of trace names (experiment, variant, tag, run id) masked as pages show
    them: a link built of raw names carried a secret-shaped name percent-encoded, where the
    page's masking could not see it (seen in an audit). The board resolves a masked name to
    the one name that masks to it (app.queries.live.unmask_name)."""
    from .secrets import mask_data

    return urlencode(mask_data(params), doseq=doseq)
