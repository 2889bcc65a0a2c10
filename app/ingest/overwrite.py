"""The overwrite rule: a run keeps the records of the source that began it.

A run remembers its origin: the source (file, upload name, zip entry, QitOS folder)
whose records created it. Records for the run from any other source are screened
before they are applied:

- a record that would **change** what is stored (a step with a different record, a
  criterion with a different result, a different `run_end` or `early_stop`) is **not
  applied**: the warning names the run, its origin, the source and what it would have
  changed;
- a record that **adds** (a new step, a criterion with no result yet, a first `run_end`)
  is applied, with a warning naming the run and what was added;
- a record equal to the stored one changes nothing and says nothing.

A different `run_start` from another source keeps its own rule (the first one received
is kept, the second is reported); a first `run_start` for a run begun by records without
one is an addition like the others. Events are keyed by content, so they only ever add.

The source that began a run may rewrite it: when its bytes changed (not only grew: a file
written anew, an upload of the same name with other content), the pass is a new version
of it, and what it changes replaces what is stored — `run_start` included, so the run is
never the old version's start with the new version's steps — with a warning naming the
run and what was replaced. So the verdict never mixes two uploads silently: anything a
second source or a second version did to a run is on the run page and in the ingest
report. A new version of an *upload* or of a whole document (a coder_eval task.json)
goes further (`Reload`): each run it began is emptied and filled again from the new
version alone, so a shorter version leaves no old tail. To load a run again from another
source, delete it first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from ..jsontext import dumps_deep, nul_safe, stored_value
from ..models import CRITERIA, CRITICS, EARLY, EVENTS, RUN_SEARCH, RUN_TAGS, RUNS, STEPS
from ..words import plural
from .batch import ReadBatch
from .rows import EVENT_DIGEST_AT

Warning_ = tuple[str, int, str, str]

#: Items of one kind listed in a warning before "…".
LISTED = 8


def _same(stored: Any, record: dict[str, Any]) -> bool:
    """Whether a record equals the stored one, NUL characters compared as the store keeps
    them (replaced in JSON columns, kept as `\\u0000` in a step's or event's line)."""
    try:
        return orjson.dumps(nul_safe(stored), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) == \
            orjson.dumps(nul_safe(record), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # nested past orjson's depth limit (ingest accepts 1024 levels)
        return bool(dumps_deep(nul_safe(stored)) == dumps_deep(nul_safe(record)))


def _key(rec: dict[str, Any]) -> Optional[tuple[Any, ...]]:
    """What a record replaces when it comes again (None: it only adds, like an event)."""
    rtype = rec["type"]
    if rtype == "step":
        return (rec["run_id"], "step", rec["step"])
    if rtype == "criterion":
        return (rec["run_id"], "criterion", rec["id"])
    if rtype in ("run_end", "early_stop", "run_start"):
        return (rec["run_id"], rtype)
    return None


def _summary(things: list[str]) -> str:
    steps = [int(t[5:]) for t in things if t.startswith("step ")]
    others = [t for t in things if not t.startswith("step ")]
    parts = []
    if steps:
        steps.sort()
        shown = ", ".join(str(s) for s in steps[:LISTED]) + (f", … ({len(steps)} in all)" if len(steps) > LISTED else "")
        parts.append(("step " if len(steps) == 1 else "steps ") + shown)
    parts.extend(others[:LISTED])
    if len(others) > LISTED:
        parts.append(f"… ({len(others)} others in all)")
    return "; ".join(parts)


@dataclass(frozen=True)
class Screened:
    """What the overwrite rule did to a batch (`screen`)."""

    #: (file, line, message, run id)
    warnings: list[Warning_]
    #: {run id: pk} of the batch's runs that were already stored
    known: dict[str, int]
    #: runs whose records a new version of their source replaces
    replacing: frozenset[str] = frozenset()
    #: runs of another source to which the batch gave nothing: every record equal to the
    #: stored one (or refused), every event stored already; they left the batch
    unchanged: frozenset[str] = frozenset()


def screen(conn: Connection, batch: ReadBatch, *, origin: str, label: str, rewrite: bool = False,
           reason: Optional[str] = None) -> Screened:
    """Drop from `batch` what the rule refuses and what another source's runs hold already.
    `rewrite`: the batch is from a new version of its source (its bytes changed since the
    last read); `reason`: why a document whose bytes did not change is read again, as the
    warnings say it (app.ingest.ingestor._document_change)."""
    run_ids = list(batch.runs)
    owners: dict[str, tuple[int, Optional[str], Optional[str]]] = {}
    for i in range(0, len(run_ids), 500):
        for pk, rid, own, own_label in conn.execute(select(RUNS.c.id, RUNS.c.run_id, RUNS.c.origin, RUNS.c.origin_label)
                                                    .where(RUNS.c.run_id.in_(run_ids[i:i + 500]))):
            owners[rid] = (pk, own, own_label)
    pks = {rid: v[0] for rid, v in owners.items()}
    foreign = {rid: v for rid, v in owners.items() if v[1] is not None and v[1] != origin}
    # A new version of the source that began a run: screened like another source's records,
    # but what it changes is applied (only a plain first read or a file that grew skips this).
    own = {rid: v for rid, v in owners.items() if rewrite and v[1] == origin}
    if not foreign and not own:
        return Screened([], pks)
    screened = {**foreign, **own}
    entries = list(batch.entries(set(screened)))

    steps: dict[str, dict[int, Any]] = {}
    crits: dict[str, dict[str, Any]] = {}
    for rid, (pk, _o, _l) in screened.items():
        wanted = [key[1] for kind, key, _rec, _line in entries if kind == "step" and key[0] == rid]
        steps[rid] = {}
        for i in range(0, len(wanted), 500):
            for n, rec in conn.execute(select(STEPS.c.step, STEPS.c.record)
                                       .where(STEPS.c.run_pk == pk, STEPS.c.step.in_(wanted[i:i + 500]))):
                steps[rid][n] = rec
        crits[rid] = {cid: result for cid, result in conn.execute(
            select(CRITERIA.c.criterion_id, CRITERIA.c.result).where(CRITERIA.c.run_pk == pk, CRITERIA.c.has_result))}

    drop_steps: set[tuple[str, int]] = set()
    drop_others: set[int] = set()
    refused: dict[str, list[str]] = {}
    added: dict[str, list[str]] = {}
    replaced: dict[str, list[str]] = {}
    replacing: set[str] = set()
    #: per run and kind of warning (refused, added, replaced), the first line it names: a
    #: warning named the run's first line read, its run_start, not a record it was about
    first_line: dict[tuple[str, str], int] = {}
    ends: dict[str, Any] = {}
    earlies: dict[str, Any] = {}
    starts: dict[str, Any] = {}
    # A key written twice in one batch: the later record wins (as the store applies them),
    # so only the last one is compared with what is stored. A step is in the batch once
    # (its later record), the others in order.
    last = {_key(rec): where for kind, where, rec, _line in entries if kind == "other"}
    for kind, where, rec, line in entries:
        rid = rec["run_id"]
        drop = drop_steps.add if kind == "step" else drop_others.add
        if kind == "other" and last[_key(rec)] != where:
            if rid not in own:
                drop(where)
            # (own: kept; the later one, applied after it, decides)
            continue
        pk = screened[rid][0]
        rtype = rec["type"]
        if rtype == "step":
            what, stored, present = f"step {rec['step']}", steps[rid].get(rec["step"]), rec["step"] in steps[rid]
        elif rtype == "criterion":
            what, stored, present = f"criterion {rec['id']!r}", crits[rid].get(rec["id"]), rec["id"] in crits[rid]
        elif rtype == "run_end":
            if rid not in ends:
                ends[rid] = conn.execute(select(RUNS.c.end_record).where(RUNS.c.id == pk)).scalar()
            what, stored, present = "run_end", ends[rid], ends[rid] is not None
        elif rtype == "early_stop":
            if rid not in earlies:
                earlies[rid] = conn.execute(select(EARLY.c.record).where(EARLY.c.run_pk == pk)).scalar()
            what, stored, present = "early_stop", earlies[rid], earlies[rid] is not None
        else:  # run_start
            if rid not in starts:
                starts[rid] = conn.execute(select(RUNS.c.start_record).where(RUNS.c.id == pk)).scalar()
            what, stored, present = "run_start", starts[rid], starts[rid] is not None
            if present and rid in foreign:
                if _same(stored_value(stored), rec):
                    drop(where)  # equal: nothing to apply
                continue  # a second, different start has its own rule (store.Applier._write_starts)
        if not present:
            if rid in foreign:
                added.setdefault(rid, []).append(what)
                first_line[(rid, "added")] = min(line, first_line.get((rid, "added"), line))
        elif _same(stored_value(stored), rec):
            if rid not in own:
                drop(where)  # equal: nothing to apply (own: applied again, harmless, keeps its derived rows whole)
        elif rid in own:
            replaced.setdefault(rid, []).append(what)
            first_line[(rid, "replaced")] = min(line, first_line.get((rid, "replaced"), line))
            replacing.add(rid)
        else:
            refused.setdefault(rid, []).append(what)
            first_line[(rid, "refused")] = min(line, first_line.get((rid, "refused"), line))
            drop(where)
    batch.drop(drop_steps, drop_others, _stored_events(conn, batch, {rid: v[0] for rid, v in foreign.items()}))
    unchanged = frozenset(rid for rid in foreign if rid not in batch.runs)

    warnings: list[Warning_] = []
    where_ = batch.label
    for rid in sorted(replaced):
        if reason is None:
            said = (f"run {rid!r}: {len(replaced[rid])} record(s) of the new version of {label} replaced what its "
                    f"earlier version stored ({_summary(replaced[rid])})")
        else:
            said = (f"run {rid!r}: {len(replaced[rid])} record(s) of {label}, read again ({reason}), replaced what "
                    f"was stored before ({_summary(replaced[rid])})")
        warnings.append((where_, first_line[(rid, "replaced")], said, rid))
    for rid in sorted(set(refused) | set(added)):
        began = foreign[rid][2] or "another source"
        if rid in refused:
            warnings.append((where_, first_line[(rid, "refused")], f"run {rid!r} was begun by {began}: {len(refused[rid])} record(s) from "
                                           f"{label} would change it and were not applied ({_summary(refused[rid])}); "
                                           "a run keeps the records of the source that began it: delete the run to "
                                           "load it again from this one", rid))
        if rid in added:
            warnings.append((where_, first_line[(rid, "added")], f"run {rid!r} was begun by {began}: {len(added[rid])} new record(s) from "
                                           f"{label} were added to it ({_summary(added[rid])})", rid))
    return Screened(warnings, pks, frozenset(replacing), unchanged)


def _stored_events(conn: Connection, batch: ReadBatch, runs: dict[str, int]) -> frozenset[tuple[str, str]]:
    """(run id, digest) of the batch's events of these runs that are stored already: they
    would add nothing (events are keyed by content), and a run given only those is unchanged."""
    wanted: dict[str, list[str]] = {}
    for row in batch.events:
        if row[0] in runs:
            wanted.setdefault(row[0], []).append(row[EVENT_DIGEST_AT])
    found: set[tuple[str, str]] = set()
    for rid, digests in wanted.items():
        for i in range(0, len(digests), 500):
            found.update((rid, d) for d in conn.execute(select(EVENTS.c.digest).where(
                EVENTS.c.run_pk == runs[rid], EVENTS.c.digest.in_(digests[i:i + 500]))).scalars())
    return frozenset(found)


def claim(conn: Connection, run_ids: list[str], *, origin: str, label: str) -> None:
    """Make `origin` the origin of these runs, if they have none yet (new runs, runs from before the rule)."""
    for i in range(0, len(run_ids), 500):
        conn.execute(update(RUNS).where(RUNS.c.run_id.in_(run_ids[i:i + 500]), RUNS.c.origin.is_(None))
                     .values(origin=origin, origin_label=label))


#: What a run_start and a run_end set, as a run has it before either arrived.
_BLANK = dict(experiment=None, variant=None, replicate=0, objective=None, agent=None, model=None, schema_version=None,
              source_format="qita", started_ts=None, started_at=None, budget_max_steps=None, budget_max_runtime_s=None,
              budget_max_tokens=None, budget_max_cost_usd=None, critics=None, stop_criteria=None,
              early_stop_enabled=False, tags=None, meta=None, start_record=None, has_start=False,
              has_end=False, end_record=None, ended_ts=None, ended_at=None, status=None, stop_reason=None,
              stop_reason_raw=None, stop_detail=None, final_result=None, verdict_recorded=None, verdict_reason=None,
              source_status=None, score=None, failure_report=None, warnings=None)


def _hash(*parts: Any) -> str:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else dumps_deep(part).encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e")
    return digest.hexdigest()


def _hash_rows(rows: Any) -> str:
    """A hash of rows read one at a time (a run's steps may be many and large)."""
    digest = hashlib.sha1()
    for row in rows:
        for value in row:
            digest.update(value.encode("utf-8", "surrogatepass") if isinstance(value, str)
                          else dumps_deep(value).encode("utf-8", "surrogatepass"))
            digest.update(b"\x1f")
        digest.update(b"\x1e")
    return digest.hexdigest()


def fingerprint(conn: Connection, pk: int) -> dict[str, Any]:
    """What a run holds, in parts a reader names ("steps", "run_end" …): counts and
    verdict as they are, everything else hashed row by row. Reads the whole run, so it is
    kept to reloads."""
    run = conn.execute(select(RUNS.c.steps, RUNS.c.verdict, RUNS.c.start_record, RUNS.c.end_record)
                       .where(RUNS.c.id == pk)).one()
    return {"n_steps": run.steps, "verdict": run.verdict, "run_start": _hash(run.start_record),
            "run_end": _hash(run.end_record),
            "steps": _hash_rows(conn.execute(select(STEPS.c.step, STEPS.c.record).where(STEPS.c.run_pk == pk)
                                             .order_by(STEPS.c.step))),
            "criteria": _hash_rows(conn.execute(select(CRITERIA.c.criterion_id, CRITERIA.c.spec, CRITERIA.c.result)
                                                .where(CRITERIA.c.run_pk == pk).order_by(CRITERIA.c.criterion_id))),
            "events": _hash_rows(conn.execute(select(EVENTS.c.digest).where(EVENTS.c.run_pk == pk)
                                              .order_by(EVENTS.c.digest))),
            "early_stop": _hash(conn.execute(select(EARLY.c.record).where(EARLY.c.run_pk == pk)).scalar())}


def wipe(conn: Connection, pk: int) -> None:
    """Empty a run of everything its records put there, keeping the run (its id, origin)."""
    for table in (CRITICS, EVENTS, STEPS, CRITERIA, EARLY, RUN_TAGS, RUN_SEARCH):
        conn.execute(delete(table).where(table.c.run_pk == pk))
    run_id = conn.execute(select(RUNS.c.run_id).where(RUNS.c.id == pk)).scalar()
    conn.execute(update(RUNS).where(RUNS.c.id == pk).values(task_id=run_id, **_BLANK))


def _state(f: dict[str, Any]) -> str:
    """"3 steps, pass": a run's size and verdict in a fingerprint, as a warning says them."""
    return f"{plural(f['n_steps'] or 0, 'step')}, {(f['verdict'] or 'no verdict').replace('_', ' ')}"


@dataclass
class Reload:
    """A pass over a new version of an uploaded source or of a whole document (its bytes
    changed, not only grew; a document's also when what it is read with changed): each run
    it began is emptied when the pass first meets it and filled again from the new version
    alone, so nothing of an earlier version (steps, events, criteria, its start or end) is
    left mixed in. At the end of the pass each run whose content changed gets one warning
    saying what did (`finish`).

    Uploads and whole documents only: a file of lines on disk may be rotated
    (`trace.jsonl` → `trace.1.jsonl`, a new `trace.jsonl`), and emptying its runs would lose
    what the rotated file holds. The offsets of such a pass are saved only at its end
    (app.ingest), so a pass that stops half way is a reload again the next time, never a
    file that merely grew.

    `whole`: the source is one document, read whole in one pass, so a run it began that
    the new version no longer makes (its id changed with the reading, or the document now
    names another task) is deleted at the end of a pass that made at least one run.
    `reason`: why a document whose bytes did not change is read again (None: a new
    version), as the warnings say it."""

    whole: bool = False
    reason: Optional[str] = None
    before: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    met: set[str] = field(default_factory=set)

    def meet(self, conn: Connection, batch: ReadBatch, *, origin: str) -> None:
        """Empty the runs this origin began that the pass meets for the first time."""
        new = [rid for rid in batch.runs if rid not in self.met]
        self.met.update(new)
        for i in range(0, len(new), 500):
            for pk, rid in conn.execute(select(RUNS.c.id, RUNS.c.run_id)
                                        .where(RUNS.c.run_id.in_(new[i:i + 500]), RUNS.c.origin == origin)).all():
                self.before[rid] = (pk, fingerprint(conn, pk))
                wipe(conn, pk)

    def finish(self, conn: Connection, *, label: str, origin: str) -> list[Warning_]:
        """One warning per run whose content the new version changed (after it was
        recomputed), and for a whole document, per run it no longer makes (deleted)."""
        source = f"the new version of {label}" if self.reason is None else f"{label}, read again ({self.reason})"
        warnings: list[Warning_] = []
        for rid, (pk, was) in sorted(self.before.items()):
            now = fingerprint(conn, pk)
            changed = [part for part in ("run_start", "steps", "criteria", "early_stop", "run_end", "events")
                       if was[part] != now[part]]
            if not changed:
                continue
            warnings.append((label, 0, f"run {rid!r} was loaded again from {source}: it had "
                                       f"{_state(was)}, it has {_state(now)} (changed: {', '.join(changed)})", rid))
        if self.whole and self.met:
            # A version that made no run (a file caught half written, refused) deletes nothing.
            gone = [(pk, rid) for pk, rid in conn.execute(select(RUNS.c.id, RUNS.c.run_id)
                                                           .where(RUNS.c.origin == origin)).all()
                    if rid not in self.met]
            if gone:
                from ..removal import delete_runs  # removal builds on the compare module, not on ingest

                delete_runs(conn, [pk for pk, _rid in gone])
                now_runs = sorted(self.met)
                shown = ", ".join(repr(r) for r in now_runs[:LISTED]) + (", …" if len(now_runs) > LISTED else "")
                makes = f"run {shown}" if len(now_runs) == 1 else f"{len(now_runs)} runs ({shown})"
                for _pk, rid in sorted(gone, key=lambda g: g[1]):
                    said = (f"run {rid!r} was deleted: it came from {label}, whose new version makes {makes} instead"
                            if self.reason is None else
                            f"run {rid!r} was deleted: it came from {label}, which now makes {makes} instead "
                            f"({self.reason})")
                    # listed with the pass and kept on the run that took its place
                    warnings.append((label, 0, said, now_runs[0]))
        return warnings
