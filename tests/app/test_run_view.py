"""The run view and the runs list: absent fields stay absent, the lane groups long runs,
trace data outside steps is shown, early-stop and live wording, number formats."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from sqlalchemy import update

from qita_board.models import CriterionRow
from qita_board.present import fmt_dt, fmt_duration, fmt_iso
from tests.app.pages_traces import early_run, run_records
from tests.app.parsed_html import attrs, one, page, select_texts, text
from tests.conftest import write_jsonl


def step_el(html: str, n: int):
    """The <article> of step n, parsed."""
    return one(html, f"article#step-{n}")


def labels(el) -> list[str]:
    """The labels of the fields shown in `el` (thought, observation, final answer, ...)."""
    return select_texts(el, ".field > .label")


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
    step = step_el(client.get("/runs/bare").text, 0)
    assert labels(step) == ["actions"]                         # no final answer, observation or thought
    assert "thought" not in text(step)
    action = one(step, "ul.actions > li")
    assert text(action) == "look" and select_texts(action, "code") == ["look"]
    assert not action.select("pre")                            # no empty args block
    assert not step.select(".ev-error")
    assert [select_texts(tr, "td") for tr in step.select("table.tools tbody tr")] == [["grep", "—", "—", "—"]]
    diff = [[text(c) for c in tr.find_all(["th", "td"])] for tr in step.select("table.diff tbody tr")]
    assert diff == [["only_after", "—", "1"]]
    assert one(step, "table.diff tbody td .muted") and one(step, "table.diff tbody td pre.pre")


def test_present_fields_still_show_including_falsy_ones(tmp_path, ingest, client):
    recs = run_records("full", steps=1)
    recs[1]["decision"]["final_answer"] = ""     # written, though empty: shown
    recs[1]["observation"] = 0
    assert ingest(write_jsonl(tmp_path / "f.jsonl", recs)).ok
    step = step_el(client.get("/runs/full").text, 0)
    assert {"final answer", "observation", "thought"} <= set(labels(step))
    shown = {text(f.select_one(".label")): text(f.select_one("pre")) for f in step.select(".field:has(> .label):has(pre)")}
    assert shown["final answer"] == "" and shown["observation"] == "0" and shown["thought"] == "because 0"


def test_step_header_omits_absent_duration_and_tokens(tmp_path, ingest, client):
    recs = run_records("cost", steps=2)
    del recs[1]["tokens"]                         # step 0: nothing to say
    recs[2]["duration_s"] = 8.25                  # step 1: 8.25 s and 10 tokens
    assert ingest(write_jsonl(tmp_path / "c.jsonl", recs)).ok
    html = client.get("/runs/cost").text
    assert not step_el(html, 0).select(".step-cost") and "tokens" not in text(step_el(html, 0))
    assert select_texts(step_el(html, 1), "summary .step-cost") == ["8.25 s · 10 tokens"]


def test_event_without_error_or_payload_shows_no_empty_parts(tmp_path, ingest, client):
    recs = run_records("ev", steps=1)
    recs.insert(2, {"type": "event", "run_id": "ev", "step": 0, "phase": "END", "ts": "2026-03-01T10:00:05+00:00", "payload": {}})
    assert ingest(write_jsonl(tmp_path / "e.jsonl", recs)).ok
    frag = page(client.get("/runs/ev/steps/0/events", headers={"HX-Request": "true"}).text)
    event = one(frag, "ol.timeline > li")
    assert text(one(event, ".phase")) == "END" and not event.select(".ev-error, pre") and "{}" not in text(event)
    assert attrs(event, "span.muted", "title") == ["2026-03-01T10:00:05+00:00"]


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
    marks = page(client.get("/runs/big").text).select("ol.lane > li > a.mark")
    assert len(marks) == 375
    assert (marks[1]["href"], marks[1]["data-step"]) == ("/runs/big?from=8#step-8", "8")
    assert marks[1]["title"].startswith("step 8–15:")


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
    # escaping is about the bytes: the raw markup must not be in the page at all
    for raw in ("<b>test_a</b>", "<i>linter</i>", "<script>alert", "<u>bar</u>", "tool <timeout>"):
        assert raw not in html, raw
    doc = page(html)
    details = one(doc, 'section[aria-label="Criteria"] tr.criterion-details')
    assert text(one(details, ".label")) == "details"
    assert "<b>test_a</b>" in text(details) and "END-OF-LOG" not in text(details)      # shown as text; long: cut ...
    assert attrs(details, "a.more", "hx-get") == ["/runs/setup/field?path=%2Fcriteria%2Ftests~1unit%2Fdetails"]  # ... and loadable
    setup = one(doc, 'section[aria-label="Run setup and report"]')
    found = {text(d.dt): d.dd for d in setup.select("dl.setup > div")}
    assert select_texts(found["critics"], "span.tag") == ["judge", "<i>linter</i>"]
    assert select_texts(found["stop criteria"], "li > code") == ["MaxSteps"]
    assert json.loads(text(one(found["stop criteria"], "li pre"))) == {"n": 7}
    assert json.loads(text(one(found["metadata"], "pre"))) == {"owner": "<script>alert(1)</script>", "seed": 1234}
    report = one(setup, ".failure-report")
    assert text(report.h3) == "Failure report (2 failures)" and text(one(report, "h3 .muted")) == "(2 failures)"
    failures = select_texts(report, "ol.failures-list > li")
    assert failures[0] == "tool <timeout>" and "boom" in failures[1]
    events = one(doc, 'section[aria-label="Run events and other records"]')
    assert text(events.h2).startswith("Run events and other records")
    assert select_texts(events, "ol.timeline > li > .phase") == ["[mystery]", "WARMUP"]
    assert "<u>bar</u>" in text(events.select("ol.timeline > li")[0])


def test_run_field_loads_whole_run_level_values(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "s.jsonl", setup_run())).ok
    full = client.get("/runs/setup/field?path=/criteria/tests~1unit/details/log", headers={"HX-Request": "true"}).text
    assert text(one(full, "pre")) == "L" * 3000 + "END-OF-LOG"        # the whole value, uncut
    assert client.get("/api/runs/setup/field?path=/run/meta/seed").json()["value"] == 1234
    assert client.get("/api/runs/setup/field?path=/run/failure_report/failures/1/error").json()["value"] == "boom"
    assert client.get("/api/runs/setup/field?path=/run_events/0/foo").json()["value"] == "<u>bar</u>"
    assert client.get("/api/runs/setup/field?path=/run/stop_criteria/0/params/n").json()["value"] == 7
    frag = client.get("/runs/setup/field?path=/run/meta/owner", headers={"HX-Request": "true"}).text
    assert "<script>" not in frag and "&lt;script&gt;" in frag      # escaping: about the bytes
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
    section = one(client.get("/runs/q-ev").text, 'section[aria-label="Events without a step record"]')
    assert text(section.h2).startswith("Events without a step record")
    groups = {g["id"]: g for g in section.select(".stepless-group")}
    assert [text(g.h3) for g in groups.values()] == ["step 0 (1 event)", "step 2 (1 event)"]
    assert select_texts(groups["events-step-0"], ".phase") == ["INIT"]
    assert json.loads(text(one(groups["events-step-0"], "pre"))) == {"task": "do <thing>"}
    assert select_texts(groups["events-step-2"], ".ev-error") == ["gone"]
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
    row = one(client.get("/runs/oor").text, 'section[aria-label="Criteria"] tbody tr:not(.criterion-details)')
    score = row.select("td")[2]                                  # criterion, type, score, threshold, ...
    assert text(one(score, "span.raw-score")) == "1.7" and text(one(score, ".badge-flag")) == "as written"


# -- 5. early stop: badge and record agree ----------------------------------------------------

def test_early_stop_reason_without_record_says_so(tmp_path, ingest, client):
    recs = run_records("es-norecord", stop_reason="early_stop") + early_run("es-record")
    assert ingest(write_jsonl(tmp_path / "e.jsonl", recs)).ok
    note = "no early-stop record in the trace"
    head = one(client.get("/runs/es-norecord").text, "section.run-head")
    assert "stop-early_stop" in one(head, ".ended-by .badge.stop")["class"]
    assert select_texts(head, ".badges .early-missing") == [note]
    assert note not in page(client.get("/runs/es-record").text).get_text()
    listing = page(client.get("/runs").text)
    rows = {text(tr.select_one("td.run-id")): tr for tr in listing.select("table.runs tbody tr")}
    assert select_texts(rows["es-norecord"], ".early-missing") == [note]
    assert not rows["es-record"].select(".early-missing") and note not in text(rows["es-record"])
    assert "has an early-stop record" in one(listing, 'select[name="early_stopped"]')["title"]
    assert "ran to the end" not in listing.get_text()
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
    live = one(client.get("/runs/lv").text, "#live")
    assert text(live).startswith("● running waiting for new records") and "--watch" in text(live)
    assert "live-unwatched" in live["class"]
    client.app.state.settings.watch = [str(tmp_path)]
    live = one(client.get("/runs/lv").text, "#live")
    assert text(live) == "● live updates as the run is written" and "live-unwatched" not in live["class"]


def test_times_say_utc_and_durations_keep_two_decimals_below_10_s():
    assert fmt_duration(8.25) == "8.25 s" and fmt_duration(9.5) == "9.50 s"
    assert fmt_duration(12.5) == "12.5 s" and fmt_duration(0.25) == "250 ms"
    assert fmt_dt(datetime(2026, 3, 1, 10, 0, 4)) == "2026-03-01 10:00:04 UTC"
    assert fmt_dt(datetime(2026, 3, 1, 12, 0, 4, tzinfo=timezone(timedelta(hours=2)))) == "2026-03-01 10:00:04 UTC"
    assert fmt_iso(datetime(2026, 3, 1, 10, 0, 4)) == "2026-03-01T10:00:04+00:00"


def test_pages_show_utc_with_full_iso_title(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "t.jsonl", run_records("t", second=4))).ok
    for url in ("/", "/runs", "/runs/t"):
        times = page(client.get(url).text).select('time[datetime="2026-03-01T10:00:04+00:00"]')
        assert times, url
        assert {(t["title"], text(t)) for t in times} == {("2026-03-01T10:00:04+00:00", "2026-03-01 10:00:04 UTC")}, url


def test_export_has_no_interactive_bits(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    doc = page(client.get("/runs/early-1/export.html").text)
    assert not doc.select("form") and "compare with" not in doc.get_text() and "j / k" not in doc.get_text()
    assert not doc.select("[hx-get], [hx-trigger]")
    hrefs = attrs(doc, "a", "href")
    assert not [h for h in hrefs if "?from=" in h]                       # no link back to a server ...
    assert attrs(doc, "ol.lane a.mark", "href")[2] == "#step-2"           # ... lane and step links stay in the file
    assert one(doc, 'a.step-link[data-step="2"]')["href"] == "#step-2"


def test_step_links_open_the_run_from_that_step(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "l.jsonl", run_records("long", steps=60))).ok
    link = one(client.get("/runs/long").text, "article#step-3 a.step-link")
    assert (link["href"], link["data-step"], text(link)) == ("/runs/long?from=3#step-3", "3", "Step 3")
    link = one(client.get("/runs/long?from=40").text, "a.earlier-link")
    # the block before starts one first block (12 steps) earlier and ends at step 39, where k and the link land
    assert (link["href"], link["data-step"]) == ("/runs/long?from=28#step-39", "39")


def test_figures_past_a_thousand_trillion_are_written_in_powers_of_ten():
    # 1e308 written out was 309 digits and widened the run page to 2,957 px (browser audit)
    from qita_board.present import fmt_int, fmt_num, fmt_score, fmt_usd

    assert (fmt_int(10**20), fmt_int(1e308), fmt_int(999_999_999_999_999)) == ("1.0e+20", "1.0e+308", "999,999,999,999,999")
    assert (fmt_num(1e308), fmt_num(2.5e15), fmt_num(12345.678)) == ("1.0e+308", "2.5e+15", "12,345.68")
    assert (fmt_score(1e308), fmt_score(-1e20), fmt_score(0.85)) == ("1.0e+308", "-1.0e+20", "0.85")
    assert (fmt_usd(1e308), fmt_usd(1234.5), fmt_usd(0.0032)) == ("$1.0e+308", "$1,234.50", "$0.0032")
    assert fmt_duration(1e308) == "2.8e+304 h" and fmt_duration(7260) == "2 h 1 min"
    # a negative figure (the ingest warns) keeps its sign before the dollar
    assert (fmt_usd(-1), fmt_usd(-0.5)) == ("-$1.00", "-$0.5000")


def test_a_negative_limit_draws_no_gauge():
    from qita_board.present import gauge

    assert gauge(3, -5) is None and gauge(3, 0) is None
    assert gauge(3, 6)["pct"] == 50


def test_long_texts_in_the_flow_of_the_page_are_cut_with_show_all(ingest, client, tmp_path):
    """A 100 KB objective, final result, stop detail, criterion description and critic
    reason were each written into the run page whole: five of them made a 500 KB page that
    held Chromium 30–90 s in layout. Each is cut, and its "show all" loads the whole."""
    big = {name: f"{name}:" + "x" * 100_000 + f":{name}-end" for name in
           ("objective", "final", "detail", "description", "reason")}
    recs = [{"type": "run_start", "run_id": "wordy", "objective": big["objective"],
             "criteria": [{"id": "c1", "type": "custom", "description": big["description"]}]},
            {"type": "step", "run_id": "wordy", "step": 0,
             "critic_outputs": [{"critic": "k", "action": "continue", "reason": big["reason"], "score": 0.5}]},
            {"type": "criterion", "run_id": "wordy", "id": "c1", "score": 1.0, "passed": True},
            {"type": "run_end", "run_id": "wordy", "status": "completed", "stop_reason": "final",
             "stop_detail": big["detail"], "final_result": big["final"], "verdict": "pass"}]
    assert ingest(write_jsonl(tmp_path / "wordy.jsonl", recs)).ok
    html = client.get("/runs/wordy").text
    assert len(html) < 100_000                       # none of the five is on the page whole
    for value in big.values():
        assert value[:500] in html and value[-20:] not in html
    links = [a["hx-get"] for a in one(html, "main").select(".long a.more")]
    wholes = [client.get(link, headers={"HX-Request": "true"}).text for link in links]
    for name, value in big.items():
        assert any(value[-20:] in whole for whole in wholes), name
