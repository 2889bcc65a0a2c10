"""The board's one error class, `BoardError` (the run side has its own, `qita.errors.QitaError`).
Its handler (in app.main) answers HTML, JSON or an htmx fragment."""

from __future__ import annotations

from typing import Any, Optional


class BoardError(Exception):
    """An error a user can act on: a message for people, an HTTP status, and what may help.

    `details` travels with the message: its keys go into the JSON answer beside `error`
    and `status`, and the error page lists them (`asked`, `nearest_run_ids`,
    `experiments`, `variants`, `valid`: see templates/_error.html).
    """

    def __init__(self, message: str, *, status: int = 400, title: str | None = None,
                 details: Optional[dict[str, Any]] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.details = details or {}
        self.title = title or {
            400: "Bad request",
            401: "Token required",
            403: "Forbidden",
            404: "Not found",
            408: "Request timeout",
            409: "Conflict",
            413: "Too large",
            421: "Wrong address",
            429: "Too many tries",
            500: "Server error",
            503: "Unavailable",
        }.get(status, "Error")
