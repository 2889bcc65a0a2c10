"""The one ingest path: the CLI, the folder watcher and uploads all call `Ingestor`
(app.ingest.ingestor).

Files are streamed line by line and applied in batches, one transaction each; the
source's byte offset is saved in the same transaction, so a killed ingest resumes
where its last committed batch ended and never duplicates a record.

The package's names load on first use (PEP 562): its reading side (`reader`, `batch`,
`lines`, `rows`, `sources`) imports without the database layer, so `qita ingest` starts
reading its first large file in a process of its own while the board's database modules
are still being imported (app.ingest.early).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qita._lazy import lazy_names

#: Where each name lives, relative to this package.
_HOMES = {
    "Ingestor": ".ingestor",
    "IngestIssue": ".ingestor",
    "IngestReport": ".ingestor",
    "Stopped": ".reader",
}

if TYPE_CHECKING:
    from .ingestor import IngestIssue, Ingestor, IngestReport
    from .reader import Stopped

__getattr__, __dir__ = lazy_names(globals(), _HOMES)

__all__ = ["Ingestor", "IngestIssue", "IngestReport", "Stopped"]
