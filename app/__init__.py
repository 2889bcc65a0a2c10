"""qita board: ingest agent-run traces into SQL and serve them as pages and JSON."""

__version__ = "0.1.0"
