"""The folder layouts the board reads besides plain JSONL files, in the order discovery
tries them (app.ingest.sources.walk_folder): a folder one of them recognises is read by it
whole, any other folder is walked for trace files. A new reader goes here.
"""

from __future__ import annotations

from . import coder_eval, qitos
from .sources import FolderReader

FOLDER_READERS: tuple[FolderReader, ...] = (
    (qitos.is_qitos_folder, qitos.qitos_sources),
    (coder_eval.is_coder_eval_folder, coder_eval.coder_eval_sources),
)
