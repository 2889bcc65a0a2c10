"""A batch of records as the reader read them: sorted by type, rows built, search texts masked.

The reader builds each record's rows while the record is still in hand (in the CPU's
cache) instead of in a second pass over the batch, and builds them where it runs: in a
reader process beside the writer for a large file (app.ingest.reader), so parsing,
checking, row building and masking use the second core while the writer's transaction
runs on the first. What crosses to the writer is rows, not parsed records: steps and
events (nearly every line) go as positional tuples holding their run's id where `run_pk`
goes, which only the writer knows; the few records the writer reads field by field (`run_start`, `run_end`,
`criterion`, `early_stop`) go whole.

Within a type the order is the file's; across types it does not matter, because the
writer applies a batch by type in a fixed order (app.ingest.store.Applier.apply), and
records of one key are applied last-one-wins (a step written twice keeps its later
record, at the place of the first).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterator, Optional

import orjson

from .. import search_texts
from .rows import CRITIC_ACTION_AT, CRITIC_REASON_AT, EVENT_DIGEST_AT, EVENT_RECORD_AT, STEP_RECORD_AT, event_row, parse_ts, step_row

#: The record types applied field by field by the writer: they travel whole.
WHOLE_TYPES = frozenset({"run_start", "run_end", "criterion", "early_stop"})


class ReadBatch:
    """The records of one batch (one transaction) of one source, sorted by type."""

    __slots__ = ("label", "encode", "positions", "runs", "steps", "events", "others", "utc_text", "parsed_ts", "texts", "docs",
                 "records")

    def __init__(self, label: str, *, encode: bool, positions: bool = False):
        self.label = label
        #: JSON values as text (SQLite, PostgreSQL by COPY) or as Python objects (app.ingest.rows)
        self.encode = encode
        #: step and event rows hold where their line lies in the file instead of its text,
        #: until the writer reads it from there (`resolve`, app.ingest.reader)
        self.positions = positions
        #: run ids in the order they first appear (new runs are numbered in this order)
        self.runs: dict[str, None] = {}
        #: (run id, step) -> (step row, critic rows, line), rows with the run id in run_pk's
        #: place (app.ingest.rows); the last record wins
        self.steps: dict[tuple[str, int], tuple[tuple, list[tuple], int]] = {}
        #: event rows (the run id in run_pk's place): events and records of unknown types
        self.events: list[tuple] = []
        #: (record, raw line, line) of the WHOLE_TYPES, in order
        self.others: list[tuple[dict[str, Any], Optional[bytes], int]] = []
        #: newest UTC "…Z" stamp text per (run, length): stamps of one length order as
        #: text, so only the newest is parsed (parsing every line was a tenth of apply)
        self.utc_text: dict[tuple[str, int], str] = {}
        #: newest other parseable stamp per run
        self.parsed_ts: dict[str, datetime] = {}
        #: per step, the critic and step texts search finds it by (cut, not yet masked); a
        #: step written again in the batch replaces its texts, as its row
        self.texts: dict[tuple[str, int], list[str]] = {}
        #: per run, those texts as one masked document (`close`)
        self.docs: dict[str, str] = {}
        #: records read into the batch
        self.records = 0

    def __len__(self) -> int:
        return self.records

    def add(self, rec: dict[str, Any], raw: Optional[bytes], line: int, at: int = 0) -> None:
        """Add one validated record (`raw`: its line as read, None for a record a transform
        made; `at`: where that line starts in the file)."""
        run_id = rec["run_id"]
        runs = self.runs
        if run_id not in runs:
            runs[run_id] = None
        self.records += 1
        ts = rec.get("ts")
        if ts is not None:
            if type(ts) is str and ts[-1:] == "Z" and ts[10:11] == "T":
                key = (run_id, len(ts))
                utc_text = self.utc_text
                if ts > utc_text.get(key, ""):
                    utc_text[key] = ts
            else:
                parsed = parse_ts(ts)
                if parsed is not None and (run_id not in self.parsed_ts or parsed > self.parsed_ts[run_id]):
                    self.parsed_ts[run_id] = parsed
        rtype = rec["type"]
        # A NUL reaches a parsed string only through a \u0000 escape: other lines skip scrubbing.
        scrub = raw is None or b"\\u0000" in raw
        where = at if self.positions else None
        if rtype == "event":
            self.events.append(event_row(run_id, rtype, rec, raw, scrub=scrub, at=where))
        elif rtype == "step":
            step = rec["step"]
            row, critics = step_row(run_id, step, rec, raw, scrub=scrub, encode=self.encode, at=where)
            key2 = (run_id, step)
            self.steps[key2] = (row, critics, line)
            self.texts[key2] = _step_search_texts(rec, critics)
        elif rtype in WHOLE_TYPES:
            self.others.append((rec, raw, line))
        else:
            self.events.append(event_row(run_id, rtype, rec, raw, scrub=scrub, at=where))

    def close(self) -> "ReadBatch":
        """Mask each run's search texts into its document (the reader does this before
        handing the batch over, so masking runs beside the writer too)."""
        by_run: dict[str, dict[str, None]] = {}
        for (run_id, _step), texts in self.texts.items():
            by_run.setdefault(run_id, {}).update(dict.fromkeys(texts))
        for run_id, lines in by_run.items():
            doc = search_texts.document(lines)
            if doc:
                self.docs[run_id] = doc
        self.texts = {}
        return self

    def resolve(self, window: bytes, start: int, read: Optional[Callable[[int, int], bytes]] = None) -> None:
        """Put each step's and event's text in place of where it lies: `window` holds the
        file's bytes from `start` on, or `read(at, length)` reads each text instead.

        A window of ASCII (most traces) is decoded once and sliced: with a function call, a
        memoryview and a decode per text, reading, checking and placing the texts of 106 MB
        took the writer 0.63 s, now 0.57 s (docs/performance.md, section 11)."""
        if not self.positions:
            return
        self.positions = False
        # Byte offsets are character offsets in ASCII: its texts are slices of it decoded once.
        whole = window.decode("ascii") if read is None and window.isascii() else None

        def text(at: int, n: int) -> str:
            if read is not None:
                return str(read(at, n), "utf-8", "replace")
            at -= start
            return str(window[at:at + n], "utf-8", "replace")

        i = STEP_RECORD_AT
        steps = self.steps
        for key, (row, critics, line) in steps.items():
            place = row[i]
            if type(place) is tuple:
                at = place[0] - start
                steps[key] = ((*row[:i], whole[at:at + place[1]] if whole is not None else text(*place), *row[i + 1:]),
                              critics, line)
        j = EVENT_RECORD_AT
        events: list[tuple] = []
        append = events.append
        for row in self.events:
            place = row[j]
            if type(place) is tuple:
                at = place[0] - start
                row = (*row[:j], whole[at:at + place[1]] if whole is not None else text(*place), *row[j + 1:])
            append(row)
        self.events = events

    @classmethod
    def merged(cls, batches: list["ReadBatch"]) -> "ReadBatch":
        """Consecutive closed batches of one source as one, as if read as one batch: a key
        written again keeps its later record at the place of its first."""
        out = cls(batches[0].label, encode=batches[0].encode)
        docs: dict[str, list[str]] = {}
        for b in batches:
            out.runs.update(b.runs)
            out.steps.update(b.steps)
            out.events += b.events
            out.others += b.others
            for key, ts in b.utc_text.items():
                if ts > out.utc_text.get(key, ""):
                    out.utc_text[key] = ts
            for run_id, parsed in b.parsed_ts.items():
                if run_id not in out.parsed_ts or parsed > out.parsed_ts[run_id]:
                    out.parsed_ts[run_id] = parsed
            for run_id, doc in b.docs.items():
                docs.setdefault(run_id, []).append(doc)
            out.records += b.records
        out.docs = {run_id: "\n".join(parts) for run_id, parts in docs.items()}
        return out

    # -- what the writer's overwrite rule reads and drops (app.ingest.overwrite) -----------
    def step_record(self, key: tuple[str, int]) -> dict[str, Any]:
        """The record of a step in the batch, parsed again from its line (rare: the overwrite rule's comparisons)."""
        return orjson.loads(self.steps[key][0][STEP_RECORD_AT])

    def entries(self, run_ids: set[str]) -> Iterator[tuple[str, Any, dict[str, Any], int]]:
        """(kind, key, record, line) of the batch's keyed records of these runs: steps by
        (run id, step), the others by their index in `others`. Events only add: not listed."""
        for key, (_row, _critics, line) in self.steps.items():
            if key[0] in run_ids:
                yield "step", key, self.step_record(key), line
        for i, (rec, _raw, line) in enumerate(self.others):
            if rec["run_id"] in run_ids:
                yield "other", i, rec, line

    def drop(self, steps: set[tuple[str, int]], others: set[int], events: frozenset[tuple[str, str]] = frozenset()) -> None:
        """Remove refused records, and `events` (run id, digest) already stored; the search
        texts of runs that lost a step are built again from the steps they kept, so a
        refused record is not searchable either. A run left with nothing leaves the batch."""
        if not steps and not others and not events:
            return
        for key in steps:
            del self.steps[key]
        self.others = [o for i, o in enumerate(self.others) if i not in others]
        if events:
            self.events = [e for e in self.events if (e[0], e[EVENT_DIGEST_AT]) not in events]
        for run_id in {k[0] for k in steps}:
            lines: dict[str, None] = {}
            for key, (row, critics, _line) in self.steps.items():
                if key[0] == run_id:
                    lines.update(dict.fromkeys(_step_search_texts(self.step_record(key), critics)))
            doc = search_texts.document(lines)
            if doc:
                self.docs[run_id] = doc
            else:
                self.docs.pop(run_id, None)
        kept = {k[0] for k in self.steps} | {row[0] for row in self.events} | {o[0]["run_id"] for o in self.others}
        self.runs = {rid: None for rid in self.runs if rid in kept}
        # their stamps would move the runs' last-seen time, a write to a run given nothing
        self.utc_text = {k: v for k, v in self.utc_text.items() if k[0] in kept}
        self.parsed_ts = {k: v for k, v in self.parsed_ts.items() if k in kept}


def _step_search_texts(rec: dict[str, Any], critics: list[tuple]) -> list[str]:
    """A step's searchable texts: each critic's action and reason as stored, its tool names and errors."""
    lines: dict[str, None] = {}
    for c in critics:
        for value in (c[CRITIC_ACTION_AT], c[CRITIC_REASON_AT]):
            if value and type(value) is str:
                lines[value if len(value) <= search_texts.TEXT_CHARS else search_texts.cut(value)] = None
    search_texts.add_texts(lines, search_texts.step_texts(rec))
    return list(lines)
