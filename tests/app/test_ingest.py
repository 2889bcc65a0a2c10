"""The one ingest path: formats, bad lines, idempotence, incremental reads, derived fields."""

from __future__ import annotations

import gzip
import os
import shutil

import orjson
import pytest
from sqlalchemy import text

from tests.conftest import ROOT, write_jsonl

pytestmark = pytest.mark.both_backends

EXAMPLE = ROOT / "docs" / "examples" / "trace-example.jsonl"


def scalar(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def run_row(engine, run_id: str) -> dict:
    with engine.connect() as conn:
        row = conn.execute(text("select * from runs where run_id = :r"), {"r": run_id}).mappings().first()
    assert row is not None, f"run {run_id!r} not stored"
    return dict(row)


def as_json(value):
    """A JSON column read through text(): a string on SQLite, already decoded on PostgreSQL."""
    return orjson.loads(value) if isinstance(value, (str, bytes)) else value


def start(run_id: str, **kw) -> dict:
    return {"type": "run_start", "run_id": run_id, **kw}


def step(run_id: str, n: int, **kw) -> dict:
    return {"type": "step", "run_id": run_id, "step": n, **kw}


def end(run_id: str, **kw) -> dict:
    return {"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": "final", **kw}


# -- the worked example ---------------------------------------------------------------


def test_worked_example_round_trips_with_every_documented_figure(ingest, engine):
    report = ingest(EXAMPLE)
    assert report.ok and report.records == 10 and report.run_ids == {"smoke/activate-skill/0"}
    r = run_row(engine, "smoke/activate-skill/0")
    assert (r["state"], r["stop_reason"], r["verdict"], r["gated_on"]) == ("finished", "early_stop", "pass", "armed")
    assert (r["steps"], r["tokens_total"], r["elapsed_s"], r["budget_max_steps"], r["budget_max_tokens"]) == (2, 900, 7.0, 6, 4000)
    assert r["early_stopped"] and r["retries"] == 1
    assert scalar(engine, "select count(*) from critic_outputs") == 4
    assert scalar(engine, "select critic_action from steps where step = 0") == "retry"
    assert scalar(engine, "select turns_remaining from early_stops") == 4


# -- QitOS run folders ------------------------------------------------------------------


def test_qitos_runs_ingest_as_four_finished_runs_with_every_critic_output(ingest, engine, qitos_runs):
    report = ingest(qitos_runs)
    assert report.ok, report.errors
    assert len(report.run_ids) == 4
    coding = run_row(engine, "qitos_coding_20260222_043631_176007")
    # legacy stop reason read as `final`, original spelling kept
    assert (coding["stop_reason"], coding["stop_reason_raw"]) == ("final", "final_result")
    assert (coding["state"], coding["verdict"], coding["steps"], coding["tokens_total"]) == ("finished", "not_graded", 3, 3591)
    assert coding["model"] == "Qwen/Qwen3-8B" and coding["budget_max_steps"] == 14
    assert coding["task_id"] == "coding_react_reflection_demo"
    # every step line carries one critic output in these traces: 3 + 2 + 2 lines, computer-use has none
    assert scalar(engine, "select count(*) from critic_outputs") == 7
    assert scalar(engine, "select count(*) from steps") == 3 + 2 + 2 + 7
    assert scalar(engine, "select count(*) from events") == 54 + 38 + 38 + 96
    cu = run_row(engine, "qitos_computer_use_20260222_053039_729823")
    assert (cu["stop_reason"], cu["stop_reason_raw"], cu["steps"]) == ("final", "final", 7)
    assert cu["final_result"].startswith("report.md has been created")


def test_qitos_folder_left_running_without_end_event_is_abandoned(ingest, engine, qitos_runs, tmp_path):
    src = qitos_runs / "qitos_coding_20260222_044138_940343"
    dst = tmp_path / "died"
    shutil.copytree(src, dst)
    manifest = orjson.loads((dst / "manifest.json").read_bytes())
    manifest["status"] = "running"
    (dst / "manifest.json").write_bytes(orjson.dumps(manifest))
    events = [line for line in (dst / "events.jsonl").read_bytes().splitlines() if orjson.loads(line)["phase"] != "END"]
    (dst / "events.jsonl").write_bytes(b"\n".join(events) + b"\n")
    assert ingest(dst).ok
    r = run_row(engine, manifest["run_id"])
    assert r["state"] == "abandoned" and r["verdict"] is None and not r["has_end"]
    assert r["steps"] == 2


def test_truncated_manifest_still_ingests_steps_and_events(ingest, engine, qitos_runs, tmp_path):
    dst = tmp_path / "broken"
    shutil.copytree(qitos_runs / "qitos_coding_20260222_045054_877344", dst)
    data = (dst / "manifest.json").read_bytes()
    (dst / "manifest.json").write_bytes(data[: len(data) // 2])
    report = ingest(dst)
    assert [e.file.endswith("manifest.json") for e in report.errors] == [True]
    assert "manifest unreadable" in report.errors[0].message
    # the run id comes from the events, so the steps still land on the right run
    r = run_row(engine, "qitos_coding_20260222_045054_877344")
    assert r["steps"] == 2 and scalar(engine, "select count(*) from events") == 38


# -- bad lines: one test per class ------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        (b"\xff\xfe{not utf8}", "line is not valid UTF-8"),
        (b"[1, 2, 3]", "not a JSON object (got an array)"),
        (b'"just a string"', "not a JSON object (got a string)"),
        (b'{"run_id": "r1", "step": 1}', "missing field 'type'"),
        (b'{"type": "step", "step": 1}', "missing field 'run_id'"),
        (b'{"type": "step", "run_id": "r1"}', "missing field 'step'"),
        (b'{"type": "step", "run_id": 7, "step": 1}', "field 'run_id': must be a string, got a number"),
        (b'{"type": "step", "run_id": "r1", "step": "one"}', "field 'step': Input should be a valid integer, got a string"),
        (b'{"type": "step", "run_id": "", "step": 1}', "field 'run_id': must be 1 to 200 characters, got 0"),
        (b'{"type": "event", "run_id": "r1", "phase": 5}', "field 'phase': Input should be a valid string, got a number"),
        (b'{"type": "step", "run_id": "r1", "step": NaN}', None),
        (b"{oops", None),
    ],
)
def test_each_bad_line_is_reported_with_file_and_line_and_the_rest_is_kept(ingest, engine, tmp_path, bad, message):
    path = write_jsonl(tmp_path / "mixed.jsonl", [start("r1"), bad, step("r1", 0), end("r1")])
    report = ingest(path)
    assert not report.ok
    assert len(report.errors) == 1
    err = report.errors[0]
    assert (err.file, err.line) == (str(path), 2)
    if message is not None:
        assert err.message == message
    else:
        assert err.message.startswith("invalid JSON")
    assert str(err) == f"{path}:2: {err.message}"
    assert report.records == 3
    assert run_row(engine, "r1")["steps"] == 1


def test_unknown_record_type_is_kept_raw_and_not_an_error(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("r1"), {"type": "custom_metric", "run_id": "r1", "value": 3}])
    report = ingest(path)
    assert report.ok and report.records == 2
    raw = scalar(engine, "select record from events where phase = '[custom_metric]'")
    assert orjson.loads(raw)["value"] == 3


def test_truncated_last_line_is_reported_and_not_consumed(ingest, engine, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(start("r1")) + b"\n" + b'{"type": "step", "run_id": "r1", "st')
    report = ingest(path)
    assert [(e.line, e.message.split(":")[0]) for e in report.errors] == [(2, "truncated last line (no newline at end of file)")]
    # the writer finishes the line: the next pass reads it
    with open(path, "ab") as fh:
        fh.write(b'ep": 0}\n')
    report = ingest(path)
    assert report.ok and report.records == 1
    assert run_row(engine, "r1")["steps"] == 1


def test_unfinished_last_line_waits_when_the_file_is_still_growing(ingest, engine, tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_bytes(orjson.dumps(start("r1")) + b"\n" + orjson.dumps(step("r1", 0))[:10])
    report = ingest(path, final=False)
    assert report.ok and report.records == 1
    with open(path, "ab") as fh:
        fh.write(orjson.dumps(step("r1", 0))[10:] + b"\n")
    assert ingest(path, final=False).records == 1
    assert run_row(engine, "r1")["steps"] == 1


def test_bom_crlf_blank_lines_and_a_last_line_without_newline_are_fine(ingest, engine, tmp_path):
    path = tmp_path / "win.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(start("r1")) + b"\r\n\r\n" + orjson.dumps(step("r1", 0)) + b"\r\n"
                     + orjson.dumps(end("r1")))
    report = ingest(path)
    assert report.ok and report.records == 3
    assert run_row(engine, "r1")["state"] == "finished"


def test_gzip_traces_are_read(ingest, engine, tmp_path):
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wb") as fh:
        for rec in (start("g1"), step("g1", 0), step("g1", 1), end("g1")):
            fh.write(orjson.dumps(rec) + b"\n")
    assert ingest(path).records == 4
    assert run_row(engine, "g1")["steps"] == 2


# -- idempotence and incremental reads -----------------------------------------------------


def _counts(engine) -> tuple:
    return tuple(scalar(engine, f"select count(*) from {t}") for t in ("runs", "steps", "critic_outputs", "events", "criteria", "early_stops"))


def test_ingesting_the_same_file_twice_changes_nothing(ingest, engine):
    first = ingest(EXAMPLE)
    before = _counts(engine)
    second = ingest(EXAMPLE)
    assert before == (1, 2, 4, 2, 3, 1)
    assert _counts(engine) == before
    assert (second.records, second.run_ids, first.records) == (0, set(), 10)


def test_the_same_records_from_another_file_add_nothing(ingest, engine, tmp_path):
    ingest(EXAMPLE)
    before = _counts(engine)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(EXAMPLE.read_bytes())
    assert ingest(copy).records == 10
    assert _counts(engine) == before


def test_a_grown_file_is_read_from_where_the_last_pass_stopped(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("r1"), step("r1", 0)])
    assert ingest(path).records == 2
    with open(path, "ab") as fh:
        fh.write(orjson.dumps(step("r1", 1)) + b"\n" + orjson.dumps(end("r1")) + b"\n")
    report = ingest(path)
    assert report.records == 2  # only the two new lines were read
    assert run_row(engine, "r1")["steps"] == 2
    assert scalar(engine, "select lines from ingest_sources") == 4


def test_a_changed_file_is_read_again_from_the_start(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("r1"), step("r1", 0, duration_s=1.0), step("r1", 1)])
    ingest(path)
    write_jsonl(path, [start("r1"), step("r1", 0, duration_s=5.0)])  # shrank and changed
    report = ingest(path)
    assert report.records == 2
    assert scalar(engine, "select duration_s from steps where step = 0") == 5.0


def test_records_may_span_files_and_arrive_in_any_order(ingest, engine, tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [
        end("x", verdict=None), {"type": "criterion", "run_id": "x", "id": "c1", "score": 0.95},
        step("x", 1, tokens={"input": 1, "output": 2, "total": 3})])
    assert ingest(a).ok
    r = run_row(engine, "x")
    assert not r["has_start"] and r["task_id"] == "x"
    b = write_jsonl(tmp_path / "b.jsonl", [
        start("x", task_id="task-x", criteria=[{"id": "c1", "pass_threshold": 0.9}]), step("x", 0, tokens={"total": 10})])
    assert ingest(b).ok
    r = run_row(engine, "x")
    assert (r["task_id"], r["steps"], r["tokens_total"], r["verdict"], r["state"]) == ("task-x", 2, 13, "pass", "finished")


def test_second_run_start_with_different_content_is_ignored_with_a_warning(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("r1", objective="first"), start("r1", objective="second"), start("r1", objective="first")])
    report = ingest(path)
    assert report.ok
    assert [(w.line, w.message) for w in report.warnings] == [
        (2, "second run_start for this run with different content: ignored, the first one received is kept")]
    r = run_row(engine, "r1")
    assert r["objective"] == "first"
    assert as_json(r["warnings"]) == ["second run_start for this run with different content: ignored, the first one received is kept"]


# -- derived fields ------------------------------------------------------------------------


def crit(run_id: str, cid: str, score: float, passed=None) -> dict:
    rec = {"type": "criterion", "run_id": run_id, "id": cid, "score": score}
    if passed is not None:
        rec["passed"] = passed
    return rec


@pytest.mark.parametrize(
    "records, verdict, gated_on",
    [
        # no criteria at all
        ([], "not_graded", "none"),
        # every gating criterion passes; the informational one failing does not matter
        ([crit("v", "a", 1.0), crit("v", "b", 0.95), crit("v", "info", 0.0)], "pass", "all"),
        # a gating criterion below threshold fails the run
        ([crit("v", "a", 1.0), crit("v", "b", 0.5)], "fail", "all"),
        # `passed` wins over the score when given
        ([crit("v", "a", 0.1, passed=True), crit("v", "b", 0.95)], "pass", "all"),
        # early-stopped: gated on the armed criterion `a` only, `b` is advisory
        ([crit("v", "a", 0.92), crit("v", "b", 0.0),
          {"type": "early_stop", "run_id": "v", "reason": "criterion_passed", "deciding_criterion": "a", "armed_criteria": ["a"]}],
         "pass", "armed"),
        ([crit("v", "a", 0.5, passed=True), crit("v", "b", 1.0),
          {"type": "early_stop", "run_id": "v", "reason": "criterion_failed", "deciding_criterion": "a", "armed_criteria": ["a"]}],
         "fail", "armed"),
    ],
)
def test_verdict_rules(ingest, engine, tmp_path, records, verdict, gated_on):
    specs = [{"id": "a", "stop_when": "pass"}, {"id": "b"}, {"id": "info", "gating": False}]
    path = write_jsonl(tmp_path / "t.jsonl", [start("v", criteria=specs if records else [], early_stop={"enabled": True}), *records, end("v")])
    assert ingest(path).ok
    r = run_row(engine, "v")
    assert (r["verdict"], r["gated_on"]) == (verdict, gated_on)


def test_recorded_verdict_wins_and_unfinished_runs_have_none(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("rec", criteria=[{"id": "a"}]), crit("rec", "a", 0.0), end("rec", verdict="pass"),
        start("open", criteria=[{"id": "a"}]), crit("open", "a", 1.0)])
    ingest(path)
    assert run_row(engine, "rec")["verdict"] == "pass"
    assert run_row(engine, "open")["verdict"] is None


def test_run_state_running_then_abandoned_when_silent(engine, settings, tmp_path):
    from datetime import datetime, timedelta, timezone

    from qita_board.ingest import Ingestor

    now = datetime.now(timezone.utc)
    recent = write_jsonl(tmp_path / "recent.jsonl", [start("live", ts=now.isoformat()), step("live", 0, ts=now.isoformat())])
    old = write_jsonl(tmp_path / "old.jsonl", [start("dead", ts=(now - timedelta(hours=2)).isoformat())])
    Ingestor(engine, settings).ingest_paths([str(recent), str(old)])
    assert run_row(engine, "live")["state"] == "running"
    assert run_row(engine, "dead")["state"] == "abandoned"
    settings.abandon_after_s = 0.0
    Ingestor(engine, settings).sweep()
    assert run_row(engine, "live")["state"] == "abandoned"


def test_ingest_reads_folders_recursively_and_skips_other_files(ingest, engine, tmp_path):
    write_jsonl(tmp_path / "a" / "b" / "deep.jsonl", [start("deep"), end("deep")])
    (tmp_path / "a" / "notes.txt").write_text("not a trace")
    report = ingest(tmp_path / "a")
    assert report.ok and report.files == 1 and report.run_ids == {"deep"}


def test_memory_is_not_needed_for_long_files_lines_are_streamed(ingest, engine, tmp_path, settings):
    # 3,000 steps in batches of 50: every batch commits, the source offset follows
    path = write_jsonl(tmp_path / "long.jsonl", [start("long")] + [step("long", i) for i in range(3000)])
    report = ingest(path)
    assert report.records == 3001
    assert scalar(engine, 'select "offset" from ingest_sources') == os.path.getsize(path)
    assert run_row(engine, "long")["steps"] == 3000


# -- a lenient reader: odd values cost the value, never the record ---------------------------


def test_null_optional_fields_read_as_absent(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "nulls.jsonl", [
        start("n", replicate=None, tags=None, critics=None, criteria=None, budget=None, early_stop=None, metadata=None),
        step("n", 0, actions=None, decision={"mode": "act", "actions": None}, critic_outputs=None, state_diff=None,
             action_results=None, tool_invocations=None, tokens=None, retry=None),
        end("n", tokens=None, failure_report=None)])
    report = ingest(path)
    assert report.ok and report.records == 3 and report.warnings == []
    r = run_row(engine, "n")
    assert (r["has_start"], r["replicate"], r["steps"], r["state"]) == (True, 0, 1, "finished")


def test_odd_critic_actions_are_kept_as_written_and_count_as_continue(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [start("o"), step("o", 0, critic_outputs=[
        {"critic": "a", "action": 42}, {"critic": "b", "action": "STOP"}, {"critic": "c", "action": "retry"}])])
    assert ingest(path).ok
    with engine.connect() as conn:
        rows = conn.execute(text("select critic, action, effective_action from critic_outputs order by idx")).all()
    assert [tuple(r) for r in rows] == [("a", "42", "continue"), ("b", "STOP", "continue"), ("c", "retry", "retry")]
    assert scalar(engine, "select critic_action from steps") == "retry"


def test_the_board_ranks_critic_actions_with_the_run_sides_ranking():
    # one home for stop > retry > continue: the run side's table, not a copy
    import qita_board.ingest.rows
    import qita_board.queries.run_detail
    from qita.engine import critic

    assert qita_board.ingest.rows.ACTION_RANK is critic.ACTION_RANK is qita_board.queries.run_detail.ACTION_RANK
    assert qita_board.ingest.rows.effective_action is critic.effective_action


def test_a_wrongly_typed_optional_value_is_dropped_with_a_warning_and_the_step_kept(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("w"), step("w", 0, tokens={"input": 1.5, "total": 9},
                                                               critic_outputs=[{"critic": "x", "score": "high"}])])
    report = ingest(path)
    assert report.ok and report.records == 2
    assert [(w.line, w.message) for w in report.warnings] == [
        (2, "field 'critic_outputs.0.score': Input should be a valid number, got a string; "
            "value ignored, the rest of the record kept"),
        (2, "field 'tokens.input': Input should be a valid integer, got a number with a fractional part; "
            "value ignored, the rest of the record kept")]
    assert (scalar(engine, "select tokens_total from steps"), scalar(engine, "select count(*) from critic_outputs")) == (9, 1)
    assert len(as_json(run_row(engine, "w")["warnings"])) == 2


def test_a_boolean_or_quoted_step_index_is_not_an_index_and_odd_flags_are_not_read_as_flags(ingest, engine, tmp_path):
    # pydantic's lax mode read `"step": true` as step 1, and `"retry": "false"` as false
    # where the store read the same value as true; JSON's own number forms still count.
    keep = "value ignored, the rest of the record kept"
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("b"),
        {"type": "step", "run_id": "b", "step": True},
        {"type": "step", "run_id": "b", "step": "3"},
        {"type": "step", "run_id": "b", "step": 2.0, "retry": "false", "tokens": {"input": "100", "output": True}},
        {"type": "event", "run_id": "b", "step": 2, "phase": "DECIDE", "ok": 1},
        {"type": "criterion", "run_id": "b", "id": "k", "passed": "false"},
        end("b", steps=True)])
    report = ingest(path)
    assert [(e.line, e.message) for e in report.errors] == [
        (2, "field 'step': Input should be a valid integer, got a boolean"),
        (3, "field 'step': Input should be a valid integer, got a string")]
    assert [(w.line, w.message) for w in report.warnings] == [
        (4, f"field 'tokens.output': Input should be a valid integer, got a boolean; {keep}"),
        (4, f"field 'retry': Input should be a valid boolean, got a string; {keep}"),
        (5, f"field 'ok': Input should be a valid boolean, got a number; {keep}"),
        (6, f"field 'passed': Input should be a valid boolean, got a string; {keep}"),
        (7, f"field 'steps': Input should be a valid integer, got a boolean; {keep}")]
    assert scalar(engine, "select count(*) from steps") == 1
    assert (scalar(engine, "select step from steps"), scalar(engine, "select retry from steps"),
            scalar(engine, "select tokens_input from steps"), scalar(engine, "select tokens_output from steps")) == (2, 0, 100, None)
    assert scalar(engine, "select ok from events") is None
    assert scalar(engine, "select has_result from criteria where criterion_id = 'k'") in (0, False)


def test_out_of_range_score_and_zero_tool_call_index_are_kept_and_flagged(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("s", criteria=[{"id": "c"}]), crit("s", "c", 1.7),
        {"type": "early_stop", "run_id": "s", "reason": "criterion_passed", "tool_call_index": 0}, end("s")])
    report = ingest(path)
    assert report.ok
    assert [w.message for w in report.warnings] == ["criterion 'c': score 1.7 is outside [0, 1]; kept as written"]
    assert scalar(engine, "select score from criteria") == 1.7
    assert scalar(engine, "select tool_call_index from early_stops") == 0


def test_an_undecided_criterion_grades_nothing_and_undeclared_results_do_not_gate(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("u", criteria=[{"id": "c"}]),
        {"type": "criterion", "run_id": "u", "id": "c", "score": None, "passed": None, "live_verdict": "undecided"},
        crit("u", "ghost", 0.0), end("u"),
        start("g", criteria=[{"id": "c"}]), crit("g", "c", 1.0), crit("g", "ghost", 0.0), end("g")])
    assert ingest(path).ok
    assert run_row(engine, "u")["verdict"] == "not_graded"
    assert run_row(engine, "g")["verdict"] == "pass"


def test_numbers_written_as_strings_count_in_totals(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("s"), step("s", 0, tokens={"input": "100", "output": "20", "total": "120"},
                                                               cost_usd="0.5", duration_s="2.5"), end("s")])
    assert ingest(path).ok
    r = run_row(engine, "s")
    assert (r["tokens_total"], r["cost_usd"]) == (120, 0.5)
    assert scalar(engine, "select duration_s from steps") == 2.5


def test_quoted_numbers_in_a_run_end_are_its_totals(ingest, engine, tmp_path):
    # The models take "0.0032" for a number in a run_end as in a step; the run read only
    # real numbers there and showed the steps' sums instead (found in a browser audit).
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("q"), step("q", 0, tokens={"input": 300, "output": 40, "total": 340}, cost_usd=0.001, duration_s=2.5),
        end("q", tokens={"input": "800", "output": "100", "total": "900", "cache_read": "50"}, cost_usd="0.0032",
            elapsed_s="7.0", agent_cost_usd="0.002", agent_elapsed_s="5", tool_calls="4", steps="1")])
    report = ingest(path)
    assert report.ok and report.warnings == []
    r = run_row(engine, "q")
    assert (r["tokens_input"], r["tokens_output"], r["tokens_total"], r["tokens_cache_read"]) == (800, 100, 900, 50)
    assert (r["cost_usd"], r["agent_cost_usd"], r["elapsed_s"], r["agent_elapsed_s"]) == (0.0032, 0.002, 7.0, 5.0)
    assert (r["tool_calls"], r["steps"]) == (4, 1)


def test_a_blank_experiment_or_variant_names_none_and_says_so(ingest, engine, tmp_path):
    # "" was filed as an experiment of that name: an empty heading on the overview, a compare
    # link that answered 400, and `?experiment=` (any) for its runs' filter.
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("e", experiment="", variant="smoke"), end("e"),
        start("v", experiment="x", variant=" \t"), end("v"),
        start("k", experiment=" x ", variant="smoke"), end("k")])
    report = ingest(path)
    assert [str(w) for w in report.warnings] == [
        f"{path}:1: run_start: experiment '' is blank; the run is filed under no experiment",
        f"{path}:3: run_start: variant ' \\t' is blank; the run is filed under no variant"]
    named = {r: (run_row(engine, r)["experiment"], run_row(engine, r)["variant"]) for r in "evk"}
    assert named == {"e": (None, "smoke"), "v": ("x", None), "k": (" x ", "smoke")}  # a name with text is as written


def test_a_negative_budget_limit_is_named_in_a_warning(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("n", budget={"max_steps": -5, "max_tokens": "-1", "max_runtime_seconds": 10}), end("n")])
    assert [str(w) for w in ingest(path).warnings] == [
        f"{path}:1: run_start: budget max_steps -5 is negative; it is shown, but no gauge is drawn against it",
        f"{path}:1: run_start: budget max_tokens -1 is negative; it is shown, but no gauge is drawn against it"]
    assert run_row(engine, "n")["budget_max_steps"] == -5  # as written


def test_a_run_end_that_gives_its_token_total_as_null_has_unknown_tokens(ingest, engine, tmp_path):
    # "total": null with no input or output: the producer has no count (coder_eval's null
    # total_token_usage); its steps' tokens are not the run's. Without "tokens", or with
    # "tokens": null (absent, as a null object reads), totals come from the steps.
    steps = [step(r, 0, tokens={"input": 100, "output": 20, "total": 120}) for r in ("n", "a", "z")]
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("n"), steps[0], end("n", tokens={"input": None, "output": None, "total": None}),
        start("a"), steps[1], end("a"),
        start("z"), steps[2], end("z", tokens=None)])
    assert ingest(path).ok
    totals = {r: (run_row(engine, r)["tokens_input"], run_row(engine, r)["tokens_total"]) for r in "naz"}
    assert totals == {"n": (None, None), "a": (100, 120), "z": (100, 120)}


def test_a_run_end_with_one_side_of_its_tokens_has_no_total(ingest, client, tmp_path):
    # "input": 100 with no output and no total was shown as "tokens 100 = 100 input + —
    # output" and summed as 100 in the runs list and compare: the output was taken as 0.
    # Both sides without a total still make one; steps' own totals still add up.
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("i"), end("i", tokens={"input": 100}),
        start("b"), end("b", tokens={"input": 100, "output": 20}),
        start("s"), step("s", 0, tokens={"total": 30}), end("s", tokens={"input": 100})])
    assert ingest(path).ok
    runs = {r: client.get(f"/api/runs/{r}").json()["run"] for r in "ibs"}
    assert {r: (v["tokens_input"], v["tokens_output"], v["tokens_total"]) for r, v in runs.items()} == {
        "i": (100, None, None), "b": (100, 20, 120), "s": (100, None, 30)}
    shown = " ".join(client.get("/runs/i").text.split())
    assert '<dd class="run-tokens">— <span class="muted">(no total: 100 input, — output)</span></dd>' in shown


def test_the_step_count_is_the_run_ends_when_it_gives_one(ingest, engine, tmp_path):
    # docs/trace-format.md, totals: the producer's count wins over the records read, fewer
    # ("f") or more ("m") than it; without one the records are counted ("c"). It took the
    # larger of the two, so a producer that counted 2 showed 3 (found against coder_eval).
    recs = []
    for rid, said in (("f", 2), ("m", 5), ("c", None)):
        recs += [start(rid), *(step(rid, i) for i in range(3)), end(rid, **({"steps": said} if said is not None else {}))]
    assert ingest(write_jsonl(tmp_path / "t.jsonl", recs)).ok
    assert {r: run_row(engine, r)["steps"] for r in "fmc"} == {"f": 2, "m": 5, "c": 3}


def test_a_quoted_integral_number_counts_where_an_integer_belongs(ingest, engine, tmp_path):
    # the model reads "100.0" as 100 without a warning; the store read it as nothing (found in review)
    path = write_jsonl(tmp_path / "t.jsonl", [start("q", replicate="1.0"),
                                              step("q", 0, tokens={"input": "100.0", "output": "20", "total": "120.0"}),
                                              end("q")])
    report = ingest(path)
    assert report.ok and report.warnings == []
    assert (scalar(engine, "select tokens_input from steps"), scalar(engine, "select tokens_total from steps"),
            scalar(engine, "select replicate from runs")) == (100, 120, 1)


def test_bad_timestamps_and_negative_elapsed_are_flagged(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [start("b", ts="garbage-ts"), end("b", ts="2026-13-45T00:00:00Z", elapsed_s=-10)])
    report = ingest(path)
    assert report.ok
    assert [(w.line, w.message) for w in report.warnings] == [
        (1, "run_start: ts 'garbage-ts' is not an RFC 3339 time; the run's times are shown without it"),
        (2, "run_end: ts '2026-13-45T00:00:00Z' is not an RFC 3339 time; the run's times are shown without it"),
        (2, "run_end: negative elapsed_s (-10); shown as written")]


def test_run_end_figures_no_run_can_have_are_said_and_shown_as_written(ingest, engine, tmp_path):
    # "$-3.5000", "tool calls -1", "tokens -2", a score of 7.5: shown as the producer wrote
    # them, as a negative elapsed_s already was, but each said (found by a browser audit)
    path = write_jsonl(tmp_path / "t.jsonl", [start("n"), end("n", cost_usd=-3.5, tool_calls=-1, steps=-2, score=7.5,
                                                                 tokens={"input": -1, "output": -1, "total": -2})])
    report = ingest(path)
    assert report.ok
    assert [w.message for w in report.warnings] == [
        "run_end: negative cost_usd (-3.5); shown as written", "run_end: negative steps (-2); shown as written",
        "run_end: negative tool_calls (-1); shown as written", "run_end: negative tokens.input (-1); shown as written",
        "run_end: negative tokens.output (-1); shown as written", "run_end: negative tokens.total (-2); shown as written",
        "run_end: score 7.5 is outside [0, 1]; shown as written"]
    assert run_row(engine, "n")["cost_usd"] == -3.5
    stored = run_row(engine, "n")["warnings"]                    # text on SQLite, parsed on PostgreSQL
    assert len(orjson.loads(stored) if isinstance(stored, str) else stored) == 7   # on the run page too


def test_early_stop_figures_no_run_can_have_are_said_and_shown_as_written(ingest, engine, tmp_path):
    # a negative elapsed_s or turns_remaining was shown without a word, while run_end's were said
    cut = {"type": "early_stop", "run_id": "e", "reason": "criterion_passed", "deciding_criterion": "c",
           "armed_criteria": ["c"], "step": 3, "tool_call_index": None, "elapsed_s": -4.5, "turns_remaining": -2}
    fine = {**cut, "run_id": "f", "elapsed_s": 0, "turns_remaining": 0}
    path = write_jsonl(tmp_path / "t.jsonl", [start("e"), cut, end("e"), start("f"), fine, end("f")])
    report = ingest(path)
    assert report.ok
    assert [(w.line, w.message) for w in report.warnings] == [
        (2, "early_stop: negative elapsed_s (-4.5); shown as written"),
        (2, "early_stop: negative turns_remaining (-2); shown as written")]
    assert scalar(engine, "select elapsed_s from early_stops") == -4.5
    stored = run_row(engine, "e")["warnings"]
    assert len(orjson.loads(stored) if isinstance(stored, str) else stored) == 2   # on the run page too


@pytest.mark.parametrize("status", ["completed", "failed", "error"])
def test_qitos_manifest_that_ended_without_a_summary_is_finished(ingest, engine, qitos_runs, tmp_path, status):
    dst = tmp_path / "nosummary"
    shutil.copytree(qitos_runs / "qitos_coding_20260222_044138_940343", dst)
    manifest = orjson.loads((dst / "manifest.json").read_bytes())
    manifest["status"] = status
    del manifest["summary"]
    (dst / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert ingest(dst).ok
    r = run_row(engine, manifest["run_id"])
    # the END event says how it stopped; the manifest says how it ended
    assert (r["state"], r["status"], r["stop_reason"], r["stop_reason_raw"]) == ("finished", status, "final", "final_result")
    again = ingest(dst)
    assert again.warnings == [] and again.records == 0


def test_early_stop_record_without_armed_criteria_marks_nothing_advisory(client, ingest, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("ga", criteria=[{"id": "g1"}], early_stop={"enabled": True}), crit("ga", "g1", 0.95),
        {"type": "early_stop", "run_id": "ga", "reason": "criterion_passed", "armed_criteria": []}, end("ga")])
    assert ingest(path).ok
    body = client.get("/api/runs/ga").json()
    assert (body["run"]["verdict"], body["run"]["gated_on"]) == ("pass", "all")
    assert [(c["id"], c["armed"], c["advisory"]) for c in body["criteria"]] == [("g1", False, False)]


def test_an_end_before_the_start_gives_no_duration_and_a_disabled_switch_arms_nothing(ingest, engine, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("clock", ts="2026-03-01T10:00:00Z"), end("clock", ts="2026-03-01T09:00:00Z"),
        start("off", criteria=[{"id": "a", "stop_when": "pass"}, {"id": "b"}], early_stop={"enabled": False}),
        crit("off", "a", 1.0), crit("off", "b", 0.0),
        {"type": "early_stop", "run_id": "off", "reason": "criterion_passed", "armed_criteria": ["a"]}, end("off")])
    assert ingest(path).ok
    assert run_row(engine, "clock")["elapsed_s"] is None
    # early_stop.enabled is false: nothing is armed, so the run is gated on every gating criterion
    r = run_row(engine, "off")
    assert (r["verdict"], r["gated_on"]) == ("fail", "all")


def test_tool_calls_are_the_dispatched_actions_unless_the_run_end_counts_them(ingest, engine, tmp_path):
    # QitOS and older qita traces do not count tool calls in run_end: the steps' calls are
    # counted instead: `actions` (the trace format's "tool calls dispatched"), else
    # `decision.actions`, else `tool_invocations`: 2 + 0 + 1 + 2 + 1 = 6.
    call = {"name": "shell", "args": {"cmd": "ls"}}
    path = write_jsonl(tmp_path / "t.jsonl", [
        start("counted"), step("counted", 0, actions=[call, call]), end("counted", tool_calls=7),
        start("summed"), step("summed", 0, actions=[call, call]), step("summed", 1, actions=[]),
        step("summed", 2, actions=[call]), step("summed", 3), step("summed", 4, decision={"actions": [call, call]}),
        step("summed", 5, tool_invocations=[{"tool_name": "shell"}]), end("summed"),
        start("none"), step("none", 0), end("none"),
        start("open"), step("open", 0, actions=[call]),
    ])
    assert ingest(path).ok
    assert run_row(engine, "counted")["tool_calls"] == 7
    assert run_row(engine, "summed")["tool_calls"] == 6
    assert run_row(engine, "none")["tool_calls"] is None
    assert run_row(engine, "open")["tool_calls"] is None  # counted once the run has ended


def test_an_error_while_writing_a_batch_is_not_reported_as_a_stream_error(ingest, engine, tmp_path, monkeypatch):
    # A ValueError raised by the writer is not "cannot decompress", and the batch it broke is
    # not committed a second time: the file is reported as not stored from that batch on
    # (a bug met on its data, app.ingest.ingestor.Refused), and nothing of it is stored.
    from qita_board.ingest.store import Applier

    path = write_jsonl(tmp_path / "t.jsonl", [start(f"r{i}") for i in range(120)])  # three batches of 50

    calls = []
    real = Applier.apply

    def broken(self, conn, items, **kw):
        calls.append(len(items))
        if len(calls) == 1:  # the first batch fails; a second try would succeed
            raise ValueError("writer bug")
        return real(self, conn, items, **kw)

    monkeypatch.setattr(Applier, "apply", broken)
    report = ingest(path)
    assert [(e.line, e.message) for e in report.errors] == [(1, (
        "not stored, with the rest of the file: an internal error stopped the batch of lines 1 to 50 "
        "(the board's log has the details)"))]
    assert calls == [50]  # stopped at the failed batch, which was not tried again
    assert scalar(engine, "select count(*) from runs") == 0
    assert scalar(engine, "select count(*) from ingest_sources") == 0


def test_a_nul_escape_in_a_step_does_not_stop_the_runs_tool_calls_being_counted(ingest, engine, tmp_path):
    # \u0000 is valid JSON text that PostgreSQL's jsonb refuses: the batch is still written,
    # and every step's calls are counted, on both backends (they are counted as each step
    # is read, not parsed again in the database).
    call = {"name": "shell", "args": {}}
    lines = [orjson.dumps(start("odd")), orjson.dumps(step("odd", 0, actions=[call])),
             b'{"type": "step", "run_id": "odd", "step": 1, "actions": [{"name": "a\\u0000b"}]}',
             orjson.dumps(step("odd", 2, actions=[call])), orjson.dumps(end("odd"))]
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    assert ingest(path).ok
    assert scalar(engine, "select count(*) from steps") == 3
    assert run_row(engine, "odd")["tool_calls"] == 3


def _weighted_gate_run(run_id: str, *, record_threshold, start_threshold=None) -> list[dict]:
    early = {"enabled": True, **({"gate_threshold": start_threshold} if start_threshold is not None else {})}
    return [
        start(run_id, early_stop=early, criteria=[
            {"id": "ran-tests", "type": "command_executed", "stop_when": "fail", "gating": True, "pass_threshold": 1.0,
             "weight": 1},
            {"id": "no-rm", "type": "command_executed", "stop_when": "fail", "gating": True, "pass_threshold": 1.0,
             "weight": 1}]),
        step(run_id, 1),
        {"type": "criterion", "run_id": run_id, "id": "ran-tests", "score": 1.0, "passed": True},
        {"type": "criterion", "run_id": run_id, "id": "no-rm", "score": 0.0, "passed": False},
        {"type": "early_stop", "run_id": run_id, "reason": "criterion_failed", "deciding_criterion": "no-rm",
         "armed_criteria": ["ran-tests", "no-rm"], "step": 1,
         **({"gate_threshold": record_threshold} if record_threshold is not None else {})},
        end(run_id, stop_reason="early_stop"),
    ]


def test_an_early_stop_is_gated_by_the_weighted_armed_gate_its_trace_records(ingest, engine, tmp_path):
    # Two armed criteria of weight 1, one failed: the plain AND fails, a gate at 0.5 passes
    # (coder_eval's armed_criteria_passed), and the early_stop record's threshold wins over
    # the one run_start announced.
    recs = (_weighted_gate_run("and", record_threshold=None) + _weighted_gate_run("half", record_threshold=0.5)
            + _weighted_gate_run("start-only", record_threshold=None, start_threshold=0.5)
            + _weighted_gate_run("record-wins", record_threshold=0.9, start_threshold=0.5))
    ingest(write_jsonl(tmp_path / "w.jsonl", recs))
    got = {r: (run_row(engine, r)["verdict"], run_row(engine, r)["criteria_verdict"])
           for r in ("and", "half", "start-only", "record-wins")}
    assert got == {"and": ("fail", "fail"), "half": ("pass", "pass"), "start-only": ("pass", "pass"),
                   "record-wins": ("fail", "fail")}


def test_an_ingest_paces_the_collector_and_gives_its_thresholds_back(engine, settings, tmp_path, monkeypatch):
    """While an ingest runs, the youngest generation is collected every 20,000 allocations
    (the row tuples of a batch ran it hundreds of times); afterwards, and after an ingest
    inside an ingest, the process has its own thresholds back."""
    import gc

    from qita_board.ingest import Ingestor
    from qita_board.ingest import ingestor as ingest_module

    before = gc.get_threshold()
    gc.set_threshold(555, 11, 12)
    try:
        path = write_jsonl(tmp_path / "t.jsonl", [{"type": "step", "run_id": "r", "step": i} for i in range(5)])
        seen: list[tuple[int, ...]] = []
        ingestor = Ingestor(engine, settings)
        real = ingestor._settle

        def settle(*a, **k):
            seen.append(gc.get_threshold())
            if len(seen) == 1:  # another ingest beginning and ending meanwhile (a watcher pass during an upload)
                with ingest_module._old_objects_frozen():
                    pass
                seen.append(gc.get_threshold())
            real(*a, **k)

        monkeypatch.setattr(ingestor, "_settle", settle)
        assert ingestor.ingest_paths([str(path)]).ok
        assert seen == [ingest_module.INGEST_GC_THRESHOLD, ingest_module.INGEST_GC_THRESHOLD] == [(20_000, 50, 100)] * 2
        assert gc.get_threshold() == (555, 11, 12)
    finally:
        gc.set_threshold(*before)


# -- file names that are not UTF-8 ------------------------------------------------------


def test_files_and_folders_named_in_bytes_that_are_not_utf8_are_read_and_named_with_escapes(ingest, engine, tmp_path,
                                                                                           qitos_runs):
    """Neither database stores the lone surrogates Python reads such a name as: the name is
    kept with \\xNN escapes, and the file is still opened by its real name."""
    folder = tmp_path / os.fsdecode(b"caf\xe9")  # a Latin-1 name on a UTF-8 system
    trace = write_jsonl(folder / os.fsdecode(b"r\xff.jsonl"),
                        [start("latin-1"), step("latin-1", 0), end("latin-1")])
    run_folder = tmp_path / os.fsdecode(b"q\xfe")
    shutil.copytree(sorted(p for p in qitos_runs.iterdir() if p.is_dir())[0], run_folder)
    report = ingest(folder, run_folder)
    assert report.ok and report.records >= 3 and "latin-1" in report.run_ids and len(report.run_ids) == 2
    with engine.connect() as conn:
        keys = sorted(k for (k,) in conn.execute(text("select path from ingest_sources")))
        origins = {r: o for r, o in conn.execute(text("select run_id, origin from runs"))}
    assert str(tmp_path) + "/caf\\xe9/r\\xff.jsonl" in keys
    assert any(k.startswith(str(tmp_path) + "/q\\xfe/") for k in keys)
    assert origins["latin-1"] == str(tmp_path) + "/caf\\xe9/r\\xff.jsonl"
    # read again: the escaped name is the same source, so nothing is read twice
    again = ingest(trace, run_folder)
    assert again.ok and again.records == 0


def test_token_sums_past_64_bits_are_unknown_and_the_file_is_kept(ingest, client, tmp_path):
    # Each count is within the format's bound (2**53 - 1); 1,100 of them in one run sum past
    # 2**63, where SQLite's integer sum() failed the batch and the whole file with it.
    big = 2**53 - 1
    recs = [{"type": "run_start", "run_id": "huge", "ts": "2026-01-01T00:00:00Z"}]
    recs += [{"type": "step", "run_id": "huge", "step": i, "tokens": {"input": big, "output": 1}} for i in range(1100)]
    recs += [{"type": "run_start", "run_id": "ends", "ts": "2026-01-01T00:00:00Z"},
             {"type": "run_end", "run_id": "ends", "status": "completed", "tokens": {"input": big, "output": big}},
             {"type": "run_start", "run_id": "after", "ts": "2026-01-01T00:00:00Z"},
             {"type": "step", "run_id": "after", "step": 0, "tokens": {"input": 3, "output": 4}}]
    report = ingest(write_jsonl(tmp_path / "t.jsonl", recs))
    assert report.ok and report.warnings == []
    huge = client.get("/api/runs/huge").json()["run"]
    assert (huge["steps"], huge["tokens_input"], huge["tokens_output"], huge["tokens_total"]) == (1100, None, 1100, None)
    ends = client.get("/api/runs/ends").json()["run"]
    assert ends["tokens_total"] == 2 * big  # a total the run names, added exactly
    after = client.get("/api/runs/after").json()["run"]
    assert (after["tokens_input"], after["tokens_output"], after["tokens_total"]) == (3, 4, 7)
