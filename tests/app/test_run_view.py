"""The run view and the runs list: absent fields stay absent, the lane groups long runs,
trace data outside steps is shown, early-stop and live wording, number formats."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import orjson
import pytest
from sqlalchemy import update

from app.models import CriterionRow
from app.present import fmt_dt, fmt_duration, fmt_iso
from tests.app.pages_traces import early_run, run_records
from tests.conftest import write_jsonl


def step_html(html: str, n: int) -> str:
    start = html.index(f'id="step-{n}"')
    end = html.find("</article>", start)
    return html[start:end]


# -- 1. fields a record lacks are not invented ------------------------------------------------

def test_step_without_decision_or_observation_shows_no_made_up_fields(tmp_path, ingest, client):
    recs = run_records("bare", steps=1)
    recs[1] = {"type": "step", "run_id": "bare", "step": 0,
               "actions": [{"name": "look"}],                          # no args
               "tool_invocations": [{"tool_name": "grep"}],            # no status, latency, error
               "state_diff": {"only_after": {"after": 1}}}
    assert ingest(write_jsonl(tmp_path / "b.jsonl", recs)).ok
    record = client.get("/api/runs/bare/steps").json()["data"][0]["record"]
    assert "decision" not in record and "observation" not in record
    step = step_html(client.get("/runs/bare").text, 0)
    assert "final answer" not in step and ">observation<" not in step and "thought" not in step
    assert "<code>look</code>" in step and '<pre class="pre"></pre>' not in step   # no empty args block
    assert 'class="ev-error"' not in step
    tools = step[step.index('class="tools"'):]
    assert "<td>grep</td><td>—</td>" in tools and "None" not in tools and " ms<" not in tools
    diff = step[step.index('class="diff"'):]
    assert re.search(r"<td><span class=\"muted\">—</span></td><td><pre class=\"pre\">1</pre></td>", diff)


def test_present_fields_still_show_including_falsy_ones(tmp_path, ingest, client):
    recs = run_records("full", steps=1)
    recs[1]["decision"]["final_answer"] = ""     # written, though empty: shown
    recs[1]["observation"] = 0
    assert ingest(write_jsonl(tmp_path / "f.jsonl", recs)).ok
    step = step_html(client.get("/runs/full").text, 0)
    assert 'class="label">final answer<' in step and 'class="label">observation<' in step
    assert 'class="label">thought<' in step and "because 0" in step


def test_step_header_omits_absent_duration_and_tokens(tmp_path, ingest, client):
    recs = run_records("cost", steps=2)
    del recs[1]["tokens"]                         # step 0: nothing to say
    recs[2]["duration_s"] = 8.25                  # step 1: 8.25 s and 10 tokens
    assert ingest(write_jsonl(tmp_path / "c.jsonl", recs)).ok
    html = client.get("/runs/cost").text
    assert "step-cost" not in step_html(html, 0) and "tokens" not in step_html(html, 0)
    assert '<span class="muted step-cost">8.25 s · 10 tokens</span>' in step_html(html, 1)


def test_event_without_error_or_payload_shows_no_empty_parts(tmp_path, ingest, client):
    recs = run_records("ev", steps=1)
    recs.insert(2, {"type": "event", "run_id": "ev", "step": 0, "phase": "END", "ts": "2026-03-01T10:00:05+00:00", "payload": {}})
    assert ingest(write_jsonl(tmp_path / "e.jsonl", recs)).ok
    frag = client.get("/runs/ev/steps/0/events", headers={"HX-Request": "true"}).text
    assert "END" in frag and "ev-error" not in frag and "{}" not in frag
    assert 'title="2026-03-01T10:00:05+00:00"' in frag


# -- 2. the verdict lane groups long runs -----------------------------------------------------

def test_lane_of_a_3000_step_run_has_one_mark_per_8_steps(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "big.jsonl", run_records("big", steps=3000))).ok
    lane = client.get("/api/runs/big").json()["lane"]
    # ceil(3000 / 400) = 8 steps per mark, 3000 / 8 = 375 marks
    assert lane["bucket"] == 8 and len(lane["marks"]) == 375
    assert [(m["step"], m["last"]) for m in lane["marks"][:2]] == [(0, 7), (8, 15)]
    assert (lane["marks"][-1]["step"], lane["marks"][-1]["last"]) == (2992, 2999)
    for a, b in zip(lane["marks"], lane["marks"][1:]):
        assert a["last"] == a["step"] + 7 and b["step"] == a["last"] + 1      # contiguous, no overlap
    html = client.get("/runs/big").text
    lane_html = html[html.index('class="lane"'):html.index("</ol>", html.index('class="lane"'))]
    assert lane_html.count('class="mark ') == 375
    assert 'href="/runs/big?from=8#step-8" data-step="8"' in lane_html and "step 8–15" in lane_html


def test_lane_buckets_follow_positions_when_step_numbers_have_gaps(tmp_path, ingest, client):
    recs = run_records("gaps", steps=401)
    for i, r in enumerate(r for r in recs if r["type"] == "step"):
        r["step"] = 2 * i                         # 0, 2, ..., 800
    assert ingest(write_jsonl(tmp_path / "g.jsonl", recs)).ok
    lane = client.get("/api/runs/gaps").json()["lane"]
    # ceil(401 / 400) = 2 steps per mark: (0, 2), (4, 6), ..., (800, 800)
    assert lane["bucket"] == 2 and len(lane["marks"]) == 201
    assert [(m["step"], m["last"]) for m in lane["marks"][:2]] == [(0, 2), (4, 6)]
    assert (lane["marks"][-1]["step"], lane["marks"][-1]["last"]) == (800, 800)


# -- 3. trace data that never reached the page ------------------------------------------------

def setup_run() -> list[dict]:
    recs = run_records("setup", steps=1, criteria=[{"id": "tests/unit"}],
                       results=[{"id": "tests/unit", "score": 0.5, "passed": False,
                                 "details": {"failed": ["<b>test_a</b>"], "log": "L" * 3000 + "END-OF-LOG"}}])
    recs[0]["critics"] = ["judge", "<i>linter</i>"]
    recs[0]["stop_criteria"] = [{"name": "MaxSteps", "params": {"n": 7}}]
    recs[0]["metadata"] = {"owner": "<script>alert(1)</script>", "seed": 1234}
    recs.insert(2, {"type": "mystery", "run_id": "setup", "foo": "<u>bar</u>"})
    recs.insert(2, {"type": "event", "run_id": "setup", "phase": "WARMUP", "ts": "2026-03-01T10:00:01+00:00", "payload": {"x": 1}})
    recs[-1]["failure_report"] = {"failure_count": 2, "failures": ["tool <timeout>", {"step": 0, "error": "boom"}]}
    return recs


def test_run_level_values_are_in_the_json_twin(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "s.jsonl", setup_run())).ok
    data = client.get("/api/runs/setup").json()
    assert data["run"]["critics"] == ["judge", "<i>linter</i>"]
    assert data["run"]["stop_criteria"] == [{"name": "MaxSteps", "params": {"n": 7}}]
    assert data["run"]["meta"] == {"owner": "<script>alert(1)</script>", "seed": 1234}
    assert data["run"]["failure_report"]["failure_count"] == 2
    assert data["criteria"][0]["details"]["failed"] == ["<b>test_a</b>"]
    # ordered by time, a record with no time first
    assert [e["phase"] for e in data["run_events"]] == ["[mystery]", "WARMUP"] and data["run_events_count"] == 2
    assert data["run_events"][0]["record"] == {"type": "mystery", "run_id": "setup", "foo": "<u>bar</u>"}


def test_run_level_values_are_shown_escaped(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "s.jsonl", setup_run())).ok
    html = client.get("/runs/setup").text
    assert "<b>test_a</b>" not in html and "&lt;b&gt;test_a&lt;/b&gt;" in html          # criterion details
    crit = html[html.index('aria-label="Criteria"'):html.index("</table>", html.index('aria-label="Criteria"'))]
    assert 'class="label">details<' in crit and "END-OF-LOG" not in crit                 # long: cut ...
    assert 'hx-get="/runs/setup/field?path=%2Fcriteria%2Ftests~1unit%2Fdetails"' in crit  # ... and loadable
    setup = html[html.index('aria-label="Run setup and report"'):html.index('aria-label="Verdict lane"')]
    assert '<span class="tag">judge</span>' in setup and "&lt;i&gt;linter&lt;/i&gt;" in setup
    assert "<code>MaxSteps</code>" in setup and "&#34;n&#34;: 7" in setup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in setup and "<script>alert" not in html
    assert "Failure report <span class=\"muted\">(2 failures)</span>" in setup
    assert "tool &lt;timeout&gt;" in setup and "boom" in setup
    events = html[html.index('aria-label="Run events and other records"'):]
    assert "Run events and other records" in events and "[mystery]" in events and "&lt;u&gt;bar&lt;/u&gt;" in events
    assert "WARMUP" in events


def test_run_field_loads_whole_run_level_values(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "s.jsonl", setup_run())).ok
    full = client.get("/runs/setup/field?path=/criteria/tests~1unit/details/log", headers={"HX-Request": "true"}).text
    assert "END-OF-LOG" in full and full.count("L") >= 3000
    assert client.get("/api/runs/setup/field?path=/run/meta/seed").json()["value"] == 1234
    assert client.get("/api/runs/setup/field?path=/run/failure_report/failures/1/error").json()["value"] == "boom"
    assert client.get("/api/runs/setup/field?path=/run_events/0/foo").json()["value"] == "<u>bar</u>"
    assert client.get("/api/runs/setup/field?path=/run/stop_criteria/0/params/n").json()["value"] == 7
    frag = client.get("/runs/setup/field?path=/run/meta/owner", headers={"HX-Request": "true"}).text
    assert "<script>" not in frag and "&lt;script&gt;" in frag
    for bad in ("/run/id", "/run/nope", "/criteria/nope/details", "/run_events/9", "/steps/0", "/run"):
        assert client.get("/api/runs/setup/field", params={"path": bad}).status_code == 404, bad
    assert client.get("/api/runs/setup/field?path=run/meta").status_code == 400
    assert client.get("/api/runs/nope/field?path=/run/meta").status_code == 404


def test_qitos_events_without_step_records_are_grouped_by_step(tmp_path, ingest, client):
    folder = tmp_path / "q_events_only"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(
        {"run_id": "q-ev", "status": "completed", "summary": {"stop_reason": "final_result", "steps": 2}}))
    write_jsonl(folder / "events.jsonl", [
        {"run_id": "q-ev", "step_id": 0, "phase": "INIT", "ok": True, "payload": {"task": "do <thing>"}, "ts": "2026-02-22T04:36:31+00:00"},
        {"run_id": "q-ev", "step_id": 2, "phase": "END", "ok": False, "payload": {}, "error": "gone", "ts": "2026-02-22T04:36:41+00:00"}])
    assert ingest(folder).ok
    data = client.get("/api/runs/q-ev").json()
    groups = data["stepless_events"]
    assert [g["step"] for g in groups] == [0, 2]
    assert [e["phase"] for g in groups for e in g["events"]] == ["INIT", "END"]
    html = client.get("/runs/q-ev").text
    section = html[html.index('aria-label="Events without a step record"'):]
    assert "Events without a step record" in section and "step 0" in section and "step 2" in section
    assert "INIT" in section and "do &lt;thing&gt;" in section and 'class="ev-error">gone<' in section
    # the cut-value loader of a stepless event is the step's own event loader
    assert client.get("/api/runs/q-ev/steps/0/field?event=0&path=/payload/task").json()["value"] == "do <thing>"


def test_out_of_range_score_is_shown_as_written(tmp_path, ingest, client, engine):
    recs = run_records("oor", steps=1, criteria=[{"id": "c"}], results=[{"id": "c", "score": 0.5}])
    assert ingest(write_jsonl(tmp_path / "o.jsonl", recs)).ok
    # As a reader keeping a criterion whose score is out of range stores it: no score,
    # the raw record as written.
    with engine.begin() as conn:
        conn.execute(update(CriterionRow.__table__).values(
            score=None, result={"type": "criterion", "run_id": "oor", "id": "c", "score": 1.7}))
    crit = client.get("/api/runs/oor").json()["criteria"][0]
    assert crit["score"] is None and crit["score_raw"] == 1.7
    html = client.get("/runs/oor").text
    row = html[html.index("<td><b>c</b>"):html.index("</tr>", html.index("<td><b>c</b>"))]
    assert '<span class="raw-score"' in row and ">1.7</span>" in row and "as written" in row


# -- 5. early stop: badge and record agree ----------------------------------------------------

def test_early_stop_reason_without_record_says_so(tmp_path, ingest, client):
    recs = run_records("es-norecord", stop_reason="early_stop") + early_run("es-record")
    assert ingest(write_jsonl(tmp_path / "e.jsonl", recs)).ok
    note = "no early-stop record in the trace"
    head = client.get("/runs/es-norecord").text
    head = head[head.index('class="run-head"'):head.index("</section>", head.index('class="run-head"'))]
    assert "stop-early_stop" in head and note in head
    assert note not in client.get("/runs/es-record").text
    listing = client.get("/runs").text
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr>\s*<td class="run-id"><a [^>]*>([^<]+)</a>.*?</tr>', listing, re.S)}
    assert note in rows["es-norecord"] and note not in rows["es-record"]
    assert re.search(r'<select name="early_stopped"[^>]*title="[^"]*has an early-stop record', listing)
    assert "ran to the end" not in listing
    # the filter counts records, which the wording now says
    assert [r["run_id"] for r in client.get("/api/runs?early_stopped=false").json()["data"]] == ["es-norecord"]


# -- 6. lesser: live wording, times, durations, export --------------------------------------

def running_run(run_id: str) -> list[dict]:
    now = datetime.now(timezone.utc).isoformat()
    recs = run_records(run_id, steps=1, end=False)
    for r in recs:
        r["ts"] = now
    return recs


def test_live_wording_depends_on_watching(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "r.jsonl", running_run("lv")), final=False).ok
    assert client.get("/api/runs/lv").json()["run"]["state"] == "running"
    html = client.get("/runs/lv").text
    assert "waiting for new records" in html and "--watch" in html and "updates as the run is written" not in html
    client.app.state.settings.watch = [str(tmp_path)]
    html = client.get("/runs/lv").text
    assert "updates as the run is written" in html and "waiting for new records" not in html


def test_times_say_utc_and_durations_keep_two_decimals_below_10_s():
    assert fmt_duration(8.25) == "8.25 s" and fmt_duration(9.5) == "9.50 s"
    assert fmt_duration(12.5) == "12.5 s" and fmt_duration(0.25) == "250 ms"
    assert fmt_dt(datetime(2026, 3, 1, 10, 0, 4)) == "2026-03-01 10:00:04 UTC"
    assert fmt_dt(datetime(2026, 3, 1, 12, 0, 4, tzinfo=timezone(timedelta(hours=2)))) == "2026-03-01 10:00:04 UTC"
    assert fmt_iso(datetime(2026, 3, 1, 10, 0, 4)) == "2026-03-01T10:00:04+00:00"


def test_pages_show_utc_with_full_iso_title(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "t.jsonl", run_records("t", second=4))).ok
    for html in (client.get("/").text, client.get("/runs").text, client.get("/runs/t").text):
        assert '<time datetime="2026-03-01T10:00:04+00:00" title="2026-03-01T10:00:04+00:00">2026-03-01 10:00:04 UTC</time>' in html


def test_export_has_no_interactive_bits(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    html = client.get("/runs/early-1/export.html").text
    assert "compare with" not in html and "<form" not in html and "j / k" not in html
    assert "?from=" not in html and 'href="#step-2"' in html           # lane and step links stay in the file
    assert "hx-get" not in html


def test_step_links_open_the_run_from_that_step(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "l.jsonl", run_records("long", steps=60))).ok
    html = client.get("/runs/long").text
    assert '<a class="step-link" href="/runs/long?from=3#step-3" data-step="3">Step 3</a>' in html
    html = client.get("/runs/long?from=40").text
    # the block before starts one first block (12 steps) earlier and ends at step 39, where k and the link land
    assert '<a class="earlier-link" href="/runs/long?from=28#step-39" data-step="39">' in html
