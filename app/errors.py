"""The board's one error class. Its handler (in app.main) answers HTML, JSON or an htmx fragment."""

from __future__ import annotations


class QitaError(Exception):
    """An error a user can act on: a message for people and an HTTP status."""

    def __init__(self, message: str, *, status: int = 400, title: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.title = title or {
            400: "Bad request",
            401: "Token required",
            403: "Forbidden",
            404: "Not found",
            408: "Request timeout",
            413: "Too large",
            421: "Wrong address",
            429: "Too many tries",
            500: "Server error",
            503: "Unavailable",
        }.get(status, "Error")
