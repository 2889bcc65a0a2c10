"""Issue 15 item 9: records for an existing run from another source are refused when they
would change it, added with a warning when they add, and the verdict never mixes silently."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.settings import Settings


def lines(*records) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def trace(objective: str, obs: str, score: float, status: str, extra_step: bool = False) -> bytes:
    recs = [{"type": "run_start", "run_id": "r1", "objective": objective, "criteria": [{"id": "c1"}]}]
    recs += [{"type": "step", "run_id": "r1", "step": i, "observation": f"{obs} {i}"} for i in range(3)]
    if extra_step:
        recs.append({"type": "step", "run_id": "r1", "step": 3, "observation": "new"})
    recs += [{"type": "criterion", "run_id": "r1", "id": "c1", "score": score},
             {"type": "run_end", "run_id": "r1", "status": status, "stop_reason": "final"}]
    return lines(*recs)


def _upload(c: TestClient, name: str, body: bytes) -> dict:
    r = c.post("/api/traces", params={"wait": "true"}, files=[("files", (name, body))])
    assert r.status_code == 200, r.text
    return r.json()


def test_a_second_upload_cannot_change_a_run_it_did_not_begin(tmp_path: Path):
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", trace("first", "from a", 1.0, "completed"))
        assert c.get("/api/runs/r1").json()["run"]["verdict"] == "pass"
        second = _upload(c, "b.jsonl", trace("second", "from b", 0.0, "failed", extra_step=True))
        messages = [w["message"] for w in second["warnings"]]
        assert ("run 'r1' was begun by a.jsonl: 5 record(s) from b.jsonl would change it and were not applied "
                "(steps 0, 1, 2; criterion 'c1'; run_end); a run keeps the records of the source that began it: "
                "delete the run to load it again from this one") in messages
        assert "run 'r1' was begun by a.jsonl: 1 new record(s) from b.jsonl were added to it (step 3)" in messages
        # each names the first line of the records it is about: steps 0 to 2 from line 2, step 3 on
        # line 5 (both named line 2, the run's first line in the batch)
        assert [(w["line"], w["message"].split(":")[1]) for w in second["warnings"] if "was begun by" in w["message"]] == [
            (2, " 5 record(s) from b.jsonl would change it and were not applied (steps 0, 1, 2; criterion 'c1'; "
                "run_end); a run keeps the records of the source that began it"),
            (5, " 1 new record(s) from b.jsonl were added to it (step 3)")]
        run = c.get("/api/runs/r1").json()["run"]
        assert (run["objective"], run["verdict"], run["status"]) == ("first", "pass", "completed")
        steps = {s["step"]: s["record"]["observation"] for s in c.get("/api/runs/r1/steps").json()["data"]}
        assert steps == {0: "from a 0", 1: "from a 1", 2: "from a 2", 3: "new"}
        page = c.get("/runs/r1").text
        assert "was begun by a.jsonl" in page and "would change it and were not applied" in page


def test_a_new_version_of_the_source_that_began_a_run_replaces_it_whole_and_says_so(tmp_path: Path):
    # The same upload name with other bytes is a new version of that source: it may change
    # the run, but all of it (its objective too: never the old start with the new steps),
    # and the upload result and the run page say what it replaced.
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", trace("first", "v1", 1.0, "completed"))
        again = _upload(c, "a.jsonl", trace("second", "v2", 0.0, "failed"))
        messages = [w["message"] for w in again["warnings"]]
        assert messages == ["run 'r1' was loaded again from the new version of a.jsonl: it had 3 steps, pass, it has "
                            "3 steps, fail (changed: run_start, steps, criteria, run_end)"]
        run = c.get("/api/runs/r1").json()["run"]
        assert (run["objective"], run["verdict"], run["status"]) == ("second", "fail", "failed")
        steps = {s["step"]: s["record"]["observation"] for s in c.get("/api/runs/r1/steps").json()["data"]}
        assert steps == {0: "v2 0", 1: "v2 1", 2: "v2 2"}
        assert "was loaded again from the new version of a.jsonl" in c.get("/runs/r1").text
        # a third version like the second: nothing replaced, and the second's warning is gone
        third = _upload(c, "a.jsonl", b"\n" + trace("second", "v2", 0.0, "failed"))  # other bytes, same records
        assert third["warnings"] == []
        assert c.get("/api/runs/r1").json()["run"]["warnings"] in (None, [])


def test_a_source_that_only_grew_adds_without_a_word(tmp_path: Path):
    first = trace("first", "v1", 1.0, "completed")
    grown = first + lines({"type": "event", "run_id": "r1", "step": 2, "phase": "NOTE", "ok": True})
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", first)
        again = _upload(c, "a.jsonl", grown)
        assert again["warnings"] == [] and again["records"] == 1


def test_a_first_run_start_from_another_source_is_an_addition_that_is_named(tmp_path: Path):
    steps_only = lines(*({"type": "step", "run_id": "r1", "step": i, "observation": "a"} for i in range(2)))
    start = lines({"type": "run_start", "run_id": "r1", "objective": "from b"})
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", steps_only)
        second = _upload(c, "b.jsonl", start)
        assert [w["message"] for w in second["warnings"]] == [
            "run 'r1' was begun by a.jsonl: 1 new record(s) from b.jsonl were added to it (run_start)"]
        assert c.get("/api/runs/r1").json()["run"]["objective"] == "from b"


def test_equal_records_from_another_source_say_nothing(tmp_path: Path):
    body = trace("first", "same", 1.0, "completed")
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", body)
        copy = _upload(c, "copy.jsonl", body)
        assert copy["warnings"] == [] and copy["records"] == 6  # run_start, 3 steps, criterion, run_end


def _two_runs(extra_event: bool = False) -> bytes:
    recs = []
    for rid in ("r1", "r2"):
        recs += [{"type": "run_start", "run_id": rid, "objective": f"o {rid}"},
                 {"type": "step", "run_id": rid, "step": 0, "observation": "x"},
                 {"type": "event", "run_id": rid, "step": 0, "phase": "ACT", "ok": True},
                 {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final"}]
    if extra_event:
        recs.append({"type": "event", "run_id": "r2", "step": 0, "phase": "NOTE", "ok": True})
    return lines(*recs)


def test_a_copy_from_another_source_leaves_its_runs_unchanged_and_says_so(tmp_path: Path):
    # A file read once (from disk, or another upload name) and uploaded again under another
    # name: every record equal, every event stored. It was listed as "Runs updated" and the
    # upload took the runs as its own additions; it changed nothing.
    db = tmp_path / "q.db"

    def written() -> dict[str, str]:
        with sqlite3.connect(db) as conn:
            return dict(conn.execute("SELECT run_id, updated_at FROM runs"))

    with TestClient(create_app(Settings(db=str(db))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", _two_runs())
        before = written()
        copy = _upload(c, "copy.jsonl", _two_runs())
        assert (copy["runs_created"], copy["runs_updated"], copy["runs_unchanged"]) == ([], [], ["r1", "r2"])
        assert copy["warnings"] == [] and copy["records"] == 8
        assert written() == before
        assert copy["upload_id"] is None  # nothing of it to remove later: the uploads list leaves it out
        # one new event for r2 (events only add, without a warning): r2 is updated and the
        # upload added to it, r1 is not
        grown = _upload(c, "grown.jsonl", _two_runs(extra_event=True))
        assert (grown["runs_updated"], grown["runs_unchanged"], grown["warnings"]) == (["r2"], ["r1"], [])
        assert written()["r1"] == before["r1"] and written()["r2"] != before["r2"]
        events = c.get("/api/runs/r2/steps/0/events").json()
        assert sorted(e["phase"] for e in events["data"]) == ["ACT", "NOTE"]
        upload = c.get(f"/api/uploads/{grown['upload_id']}").json()
        assert [r["run_id"] for r in upload["runs_updated"]] == ["r2"]


def test_a_run_whose_records_are_all_refused_is_unchanged_and_the_warning_says_why(tmp_path: Path):
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", trace("first", "from a", 1.0, "completed"))
        second = _upload(c, "b.jsonl", trace("first", "from b", 0.0, "failed"))
        assert (second["runs_updated"], second["runs_unchanged"]) == ([], ["r1"])
        assert any("would change it and were not applied" in w["message"] for w in second["warnings"])
        assert c.get("/api/runs/r1").json()["run"]["verdict"] == "pass"


def test_a_qitos_folder_is_one_source(ingest, qitos_runs):
    folder = next(p for p in sorted(qitos_runs.iterdir()) if (p / "manifest.json").is_file())
    report = ingest(folder)
    assert not any("was begun by" in w.message for w in report.warnings)


def test_a_shorter_new_version_takes_away_what_it_no_longer_has(tmp_path: Path):
    # v1: steps 0-4, an early stop, criteria c1 and c2, an event at step 4, a run_end.
    # v2 (same name): steps 0-2, c1 only, no early stop, no end: the run is v2 alone.
    v1 = [{"type": "run_start", "run_id": "r1", "objective": "o", "criteria": [{"id": "c1"}, {"id": "c2"}]}]
    v1 += [{"type": "step", "run_id": "r1", "step": i, "observation": f"v1 {i}",
            "critic_outputs": [{"critic": "c", "action": "continue", "reason": f"wombat{i}", "score": 1.0}]}
           for i in range(5)]
    v1 += [{"type": "event", "run_id": "r1", "step": 4, "phase": "NOTE", "ok": True, "payload": {"w": "zebra"}},
           {"type": "criterion", "run_id": "r1", "id": "c1", "score": 1.0},
           {"type": "criterion", "run_id": "r1", "id": "c2", "score": 1.0},
           {"type": "early_stop", "run_id": "r1", "reason": "criterion_passed", "step": 4},
           {"type": "run_end", "run_id": "r1", "status": "completed", "stop_reason": "final", "final_result": "quokka"}]
    v2 = [v1[0], *v1[1:4], {"type": "criterion", "run_id": "r1", "id": "c1", "score": 0.0}]
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", lines(*v1))
        assert c.get("/api/runs/r1").json()["run"]["verdict"] == "pass"
        for q in ("quokka", "wombat4", "wombat2"):  # found before: the test below can fail
            assert c.get("/api/runs", params={"q": q}).json()["count"] == 1, q
        again = _upload(c, "a.jsonl", lines(*v2))
        messages = [w["message"] for w in again["warnings"]]
        assert messages == ["run 'r1' was loaded again from the new version of a.jsonl: it had 5 steps, pass, it has "
                            "3 steps, no verdict (changed: steps, criteria, early_stop, run_end, events)"]
        run = c.get("/api/runs/r1").json()
        assert (run["run"]["steps"], run["run"]["state"], run["run"]["verdict"]) == (3, "abandoned", None)
        assert run["early_stop"] is None
        steps = c.get("/api/runs/r1/steps").json()["data"]
        assert [s["step"] for s in steps] == [0, 1, 2]
        crits = {k["id"]: k["score"] for k in c.get("/api/runs/r1").json()["criteria"]}
        assert crits == {"c1": 0.0, "c2": None}
        # the earlier version's texts are no longer found
        for q in ("quokka", "wombat4"):
            assert c.get("/api/runs", params={"q": q}).json()["count"] == 0, q
        assert c.get("/api/runs", params={"q": "wombat2"}).json()["count"] == 1
        events = c.get("/api/runs/r1/steps/4/events")
        assert events.status_code == 404 or events.json()["data"] == []


def _records(*recs) -> bytes:
    return lines(*recs)


def test_a_new_version_drops_the_criteria_events_and_start_the_earlier_one_had(tmp_path: Path):
    v1 = [{"type": "run_start", "run_id": "r1", "objective": "OLD", "criteria": [{"id": "c1"}, {"id": "c2"}]},
          {"type": "step", "run_id": "r1", "step": 1, "observation": "x"},
          {"type": "event", "run_id": "r1", "step": 1, "phase": "NOTE", "ok": True, "payload": {"v": 1}},
          {"type": "criterion", "run_id": "r1", "id": "c1", "score": 1.0},
          {"type": "criterion", "run_id": "r1", "id": "c2", "score": 1.0},
          {"type": "run_end", "run_id": "r1", "status": "completed", "stop_reason": "final"}]
    # v2 declares c1 only (a fresh ingest of it passes) and has its own event at step 1
    v2 = [{**v1[0], "criteria": [{"id": "c1"}]}, v1[1], {**v1[2], "payload": {"v": 2}}, v1[3], v1[5]]
    # v3 has no run_start at all: the run has no objective rather than v2's
    v3 = [v1[1], v1[3], v1[5]]
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        _upload(c, "a.jsonl", _records(*v1))
        _upload(c, "a.jsonl", _records(*v2))
        run = c.get("/api/runs/r1").json()
        assert run["run"]["verdict"] == "pass" and [k["id"] for k in run["criteria"]] == ["c1"]
        events = c.get("/api/runs/r1/steps/1/events").json()["data"]
        assert [e["record"]["payload"] for e in events] == [{"v": 2}]
        _upload(c, "a.jsonl", _records(*v3))
        run = c.get("/api/runs/r1").json()["run"]
        assert (run["objective"], run["steps"]) == (None, 1)


def test_a_file_on_disk_that_was_rotated_loses_nothing(ingest, engine, tmp_path: Path):
    # trace.jsonl → trace.1.jsonl and a new trace.jsonl: no reload for files on disk
    folder = tmp_path / "logs"
    folder.mkdir()
    first = [{"type": "run_start", "run_id": "r1"}] + [{"type": "step", "run_id": "r1", "step": i} for i in range(3)]
    (folder / "trace.jsonl").write_bytes(_records(*first))
    ingest(folder, final=False)
    (folder / "trace.jsonl").rename(folder / "trace.1.jsonl")
    (folder / "trace.jsonl").write_bytes(_records(*({"type": "step", "run_id": "r1", "step": i} for i in range(3, 6))))
    ingest(folder, final=False)
    from sqlalchemy import text

    with engine.connect() as conn:
        steps = [n for (n,) in conn.execute(text("select step from steps order by step"))]
    assert steps == [0, 1, 2, 3, 4, 5]


def test_a_reload_stopped_half_way_is_a_reload_again_next_time(tmp_path: Path, monkeypatch):
    from qita_board.db import open_database
    from qita_board.ingest import Ingestor, Stopped
    from qita_board.ingest import reader as ingest_module

    monkeypatch.setattr(ingest_module, "STOP_CHECK_LINES", 1)
    settings = Settings(db=str(tmp_path / "q.db"), batch_lines=2)
    path = tmp_path / "a.jsonl"
    v1 = [{"type": "run_start", "run_id": "r1", "objective": "OLD", "criteria": [{"id": "c1"}]}]
    v1 += [{"type": "step", "run_id": "r1", "step": i, "observation": f"v1 {i}"} for i in range(6)]
    v1 += [{"type": "criterion", "run_id": "r1", "id": "c1", "score": 1.0},
           {"type": "run_end", "run_id": "r1", "status": "completed", "stop_reason": "final"}]
    v2 = [{"type": "step", "run_id": "r1", "step": i, "observation": f"v2 {i}"} for i in range(3)]
    v2 += [{**v1[0], "objective": "NEW"}, {"type": "criterion", "run_id": "r1", "id": "c1", "score": 0.0},
           {"type": "run_end", "run_id": "r1", "status": "failed", "stop_reason": "final"}]
    # r2 comes after the point where the pass stops: 4 steps in v1, 1 in v2
    v1 += [{"type": "step", "run_id": "r2", "step": i} for i in range(4)]
    v2 += [{"type": "step", "run_id": "r2", "step": 0}]
    engine = open_database(settings)
    try:
        path.write_bytes(_records(*v1))
        Ingestor(engine, settings).ingest_paths([str(path)], key_prefix="upload:", labels=["a.jsonl"])
        path.write_bytes(_records(*v2))
        # stop right after the first batch of the new version was committed (settled at the
        # end of its transaction)
        committed: list[int] = []
        real_settle = Ingestor._settle

        def settle_then_count(self, *a, **k):
            real_settle(self, *a, **k)
            committed.append(1)

        monkeypatch.setattr(Ingestor, "_settle", settle_then_count)
        with pytest.raises(Stopped):
            Ingestor(engine, settings, stop=lambda: bool(committed)).ingest_paths(
                [str(path)], key_prefix="upload:", labels=["a.jsonl"])
        monkeypatch.setattr(Ingestor, "_settle", real_settle)
        with engine.connect() as conn:  # the first batch (steps 0 and 1 of v2) went in
            from sqlalchemy import text as sql

            assert conn.execute(sql("select s.record from steps s join runs r on r.id = s.run_pk "
                                    "where r.run_id = 'r1' and s.step = 0")).scalar().count("v2 0") == 1
        Ingestor(engine, settings).ingest_paths([str(path)], key_prefix="upload:", labels=["a.jsonl"])
        from sqlalchemy import text

        with engine.connect() as conn:
            objective, verdict = conn.execute(text("select objective, verdict from runs where run_id = 'r1'")).one()
            steps = [tuple(r) for r in conn.execute(text(
                "select r.run_id, s.step from steps s join runs r on r.id = s.run_pk order by 1, 2"))]
        assert (objective, verdict) == ("NEW", "fail")
        assert steps == [("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0)]
    finally:
        engine.dispose()
