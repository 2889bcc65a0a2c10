"""What a run is found by, as text: its fields, its critic and step texts, cut and masked.

No database here: the reader builds each batch's search document from the records as it
reads them (app.ingest.batch), in a process of its own that must start before the board's
database layer is even imported (app.ingest.early); app.search stores these texts and
queries them.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .secrets import cut_point, mask_at, mask_text
from .step_failures import step_errors

#: The run's own fields that search finds it by.
RUN_FIELDS = ("run_id", "task_id", "experiment", "variant", "model", "objective", "final_result", "stop_detail",
              "verdict_reason")
#: JSON columns whose top-level strings search finds a run by: its metadata (e.g. coder_eval's
#: experiment description) and its end record (e.g. an error message), masked by key.
RUN_DATA_FIELDS = ("meta", "end_record")
#: Keys of those that are the record's framing, not what the run said: every finished
#: run's end record holds `"type": "run_end"`, so `run_end` (or `_`) found every run.
FRAMING_KEYS = frozenset({"type", "run_id", "ts"})
#: How much of one text is searchable: a page shows 2,000 characters of an objective.
TEXT_CHARS = 4096


def searchable(value: Any) -> Optional[str]:
    """`value` as search holds it: cut where no secret is split, masked; None when empty."""
    if not isinstance(value, str) or not value.strip():
        return None
    return mask_text(cut(value))


def cut(value: str) -> str:
    """`value` cut to about TEXT_CHARS, masked first where it is longer: cutting first can
    take the end of a secret's shape away (the `@` of `postgresql://u:pw@host` just past the
    cut left `pw` unmasked, and searchable character by character). Masking looks at a few
    times TEXT_CHARS (no secret is longer), then the masked text is cut where no
    placeholder splits."""
    if len(value) <= TEXT_CHARS:
        return value
    masked = mask_text(value[:cut_point(value, 0, 4 * TEXT_CHARS)])
    return masked if len(masked) <= TEXT_CHARS else masked[:cut_point(masked, 0, TEXT_CHARS)]


def step_texts(record: Any) -> list[Any]:
    """The texts a step record is found by: the tool names it holds, wherever a producer put
    them (search wants them all; `app.lab.state.step_tool_calls` picks one list by
    precedence, which costs more), and what failed in it. The record is in hand, so its
    failures are looked up where they live, not found by a regular expression over its
    text (half the time on the benchmark's steps, and a long observation costs nothing)."""
    if type(record) is not dict:
        return []
    texts: list[Any] = []
    decision = record.get("decision")
    for calls in (record.get("actions"), decision.get("actions") if type(decision) is dict else None,
                  record.get("tool_invocations")):
        if type(calls) is list:
            for call in calls:
                if type(call) is dict:
                    texts.append(call.get("name") or call.get("tool_name"))
    if record.get("error") or record.get("tool_invocations") or record.get("action_results"):
        texts += step_errors(record)
    return texts


def add_texts(lines: dict[str, None], values: Iterable[Any]) -> None:
    """Add the non-empty strings among `values`, cut, to a run's lines (a dict: ordered, no duplicates)."""
    for value in values:
        if isinstance(value, str) and value:
            lines[value if len(value) <= TEXT_CHARS else cut(value)] = None


def document(lines: Iterable[str]) -> Optional[str]:
    """A run's new critic and step texts as one masked document, one text per line.

    Per text, masking and an index row cost ~40 µs (measured on 80-character critic
    reasons), three critics a step; one document per batch costs a fraction of that. No
    secret holds a line break (app.secrets), so joining lines hides none."""
    text = "\n".join(lines)
    return no_nul(mask_text(text)) if text else None


def no_nul(text: str) -> str:
    # NUL removed, as the store does (PostgreSQL's text refuses it; a step may hold \u0000)
    return text.replace("\x00", "") if "\x00" in text else text


def run_texts(run: Any) -> list[str]:
    """The masked texts of a run's own fields (`run`: its row, with RUN_FIELDS and RUN_DATA_FIELDS)."""
    texts = [searchable(run[name]) for name in RUN_FIELDS]
    for name in RUN_DATA_FIELDS:
        data = run.get(name) if hasattr(run, "get") else None
        if isinstance(data, dict) and data:
            # Each top-level string masked by where it lives (a `password` key's value whatever
            # it looks like), as masking the whole value would mask it; what lies deeper is not
            # searched, so it is not masked either (the fields of 1,730 five-step runs took
            # 0.20 s to mask with the whole values masked, 0.13 s so: docs/performance.md).
            texts += [searchable(mask_at(v, (k,))) for k, v in data.items()
                      if isinstance(v, str) and k not in FRAMING_KEYS]
    return [no_nul(t) for t in texts if t]
