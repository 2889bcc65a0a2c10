"""Why a failing run failed: the criteria that weighed on its verdict, in the run header,
the failure report and the runs list's reasons; and a header that does not contradict itself."""

from __future__ import annotations

import re

import pytest

from qita_board.failures import top_reasons
from tests.app.pages_traces import early_run, run_records
from tests.app.parsed_html import one, page, select_texts, text
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends


def failed_run(run_id: str = "f1") -> list[dict]:
    """Ends with a final answer, yet fails `says_fixed`; `lint` fails too but is informational."""
    recs = run_records(run_id, steps=3, stop_reason="final", stop_detail="final_result is set",
                       criteria=[{"id": "ran_tests", "type": "command_executed"},
                                 {"id": "says_fixed", "type": "final_answer_contains", "pass_threshold": 0.9},
                                 {"id": "lint", "gating": False}],
                       results=[{"id": "ran_tests", "score": 1.0, "passed": True, "decided_at_step": 1,
                                 "details": {"tool_call_indexes": [2], "count": 1}},
                                {"id": "says_fixed", "score": 0.0, "passed": False, "details": {"step": 2}},
                                {"id": "lint", "score": 0.0, "passed": False}])
    recs[-1]["failure_report"] = {}
    return recs


def links(el, css: str) -> list[tuple]:
    """(href, data-step, text) of each link `css` selects."""
    return [(a["href"], a.get("data-step"), text(a)) for a in el.select(css)]


def criterion_rows(html: str) -> dict:
    """The run page's criteria table rows by criterion id."""
    rows = page(html).select('section[aria-label="Criteria"] tbody tr:not(.criterion-details)')
    return {text(tr.td.b): tr for tr in rows}


def test_header_gives_the_verdict_colour_and_the_stop_reason_none(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "f.jsonl", failed_run())).ok
    badges = one(client.get("/runs/f1").text, "section.run-head > .badges")
    shown = badges.find_all(True, recursive=False)
    # the verdict comes first; the stop reason is introduced as what ended the run
    assert shown[0]["class"] == ["badge", "verdict", "verdict-fail"]
    ended = one(badges, ".ended-by")
    assert ended in shown and text(ended.find(True)) == "ended by" and "stop-final" in one(ended, ".badge.stop")["class"]
    assert "✓" not in text(badges)                             # no green tick beside a failed verdict
    css = client.get("/static/app.css").text
    assert re.search(r"\.badge\.stop,[^{]*\{background:var\(--neutral-bg\);color:var\(--fg\)", css)
    assert ".stop-final::before{content:none}" in css


def test_failing_criteria_are_named_when_the_run_recorded_no_failures(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "f.jsonl", failed_run())).ok
    body = client.get("/api/runs/f1").json()
    assert [c["id"] for c in body["failing_criteria"]] == ["says_fixed"]   # lint is informational
    doc = page(client.get("/runs/f1").text)
    failed_on = one(doc, "#failed-on")
    assert select_texts(failed_on, ".failed-criterion > b") == ["says_fixed"] and "lint" not in text(failed_on)
    assert select_texts(failed_on, ".failed-criterion > .muted") == ["score 0.00 < 0.90"]
    report = one(doc, 'section[aria-label="Run setup and report"] .failure-report')
    assert text(one(report, "p.muted")) == "empty: the run recorded no failures here; the criteria it failed:"
    assert [text(li.b) for li in report.select("ol.failures-list.derived-failures > li")] == ["says_fixed"]


def test_criterion_evidence_links_to_its_steps_and_tool_calls(tmp_path, ingest, client):
    assert ingest(write_jsonl(tmp_path / "f.jsonl", failed_run())).ok
    rows = criterion_rows(client.get("/runs/f1").text)
    assert links(rows["ran_tests"], "a.evidence.step-ref") == [("/runs/f1?from=1#step-1", "1", "decided at step 1")]
    assert links(rows["ran_tests"], "a.evidence.call-ref") == [("/runs/f1/calls/2", None, "tool call #2")]
    assert links(rows["says_fixed"], "a.evidence.step-ref") == [("/runs/f1?from=2#step-2", "2", "step 2")]
    # run_records gives each step one action: call 2 is step 1's
    assert client.get("/api/runs/f1/calls/2").json()["step"] == 1


def test_a_passing_run_lists_no_failing_criteria_and_an_advisory_one_is_not_blamed(tmp_path, ingest, client):
    # early-1 passes on its armed criterion; e2e failed but was advisory
    assert ingest(write_jsonl(tmp_path / "e.jsonl", early_run())).ok
    body = client.get("/api/runs/early-1").json()
    assert body["run"]["verdict"] == "pass" and body["failing_criteria"] == []
    doc = page(client.get("/runs/early-1").text)
    assert not doc.select("#failed-on")
    assert ("/runs/early-1?from=2#step-2", "2", "step 2") in links(doc, "a.evidence.step-ref")
    assert ("/runs/early-1/calls/1", None, "tool call #1") in links(doc, "a.evidence.call-ref")


def test_list_reasons_count_failing_runs_only(tmp_path, ingest, client):
    recs = failed_run("f1") + failed_run("f2")
    # a passing run whose stop detail would have topped the old list
    recs += run_records("p1", stop_reason="final", stop_detail="final_result is set",
                        criteria=[{"id": "c"}], results=[{"id": "c", "score": 1.0, "passed": True}])
    assert ingest(write_jsonl(tmp_path / "l.jsonl", recs)).ok
    stats = client.get("/api/runs").json()["stats"]
    assert stats["failing"] == 2
    assert [(f["reason"], f["count"]) for f in stats["top_failures"]] == [("criterion says_fixed failed", 2)]


def test_top_reasons_count_a_run_once_per_reason_most_first_then_by_text():
    runs = [{"reasons": [{"reason": "b"}, {"reason": "b"}, {"reason": "a"}]}, {"reasons": [{"reason": "a"}]},
            {"reasons": [{"reason": None}]}, {"reasons": [{"reason": "c"}]}]
    assert [(r["reason"], r["count"]) for r in top_reasons(runs, limit=3)] == [("a", 2), ("b", 1), ("c", 1)]
    assert top_reasons(runs)[-1] == {"reason": None, "count": 1}


def test_a_run_failed_by_its_recorded_verdict_is_counted_under_its_own_reason(tmp_path, ingest, client):
    # Every criterion passed and the run stopped early on a passing one, but the run
    # recorded a failing verdict with its reason (coder_eval's TOKEN_BUDGET_EXCEEDED): the
    # stop detail (the passing criterion's details) is how it ended, not why it failed.
    recs = run_records("over", stop_reason="early_stop", stop_detail="Matched 1/1 required commands",
                       criteria=[{"id": "ran", "stop_when": "decided"}],
                       results=[{"id": "ran", "score": 1.0, "passed": True}])
    recs[-1].update(verdict="fail", verdict_reason="failed: token budget exceeded")
    # a run that errored with no reason of its own is still counted under its stop detail
    crash = run_records("crash", stop_reason="unrecoverable_error", stop_detail="process exited with code 1")
    crash[-1].update(verdict="error")
    assert ingest(write_jsonl(tmp_path / "v.jsonl", recs + crash)).ok
    stats = client.get("/api/runs").json()["stats"]
    assert stats["failing"] == 2
    assert sorted((f["reason"], f["count"]) for f in stats["top_failures"]) == [
        ("failed: token budget exceeded", 1), ("process exited with code 1", 1)]
    variants = client.get("/api/experiments").json()["experiments"][0]["variants"]
    assert sorted(r["reason"] for r in variants[0]["failure_reasons"]) == [
        "failed: token budget exceeded", "process exited with code 1"]


def test_a_run_failed_by_its_status_is_counted_under_it_and_under_its_failed_criteria(tmp_path, ingest, client):
    # coder_eval's MAX_TURNS_EXHAUSTED fails the run whatever its criteria said; with a
    # criterion failed too, the run was counted under the criterion only, and "turn budget
    # exhausted" was nowhere among the reasons.
    recs = run_records("turns", stop_reason="budget_steps", criteria=[{"id": "tests"}, {"id": "ran"}],
                       results=[{"id": "tests", "score": 0.0, "passed": False}, {"id": "ran", "score": 1.0, "passed": True}])
    recs[-1].update(verdict="fail", verdict_reason="failed: turn budget exhausted")
    plain = run_records("plain", criteria=[{"id": "tests"}], results=[{"id": "tests", "score": 0.0, "passed": False}])
    assert ingest(write_jsonl(tmp_path / "t.jsonl", recs + plain)).ok
    stats = client.get("/api/runs").json()["stats"]
    assert [(f["reason"], f["count"]) for f in stats["top_failures"]] == [
        ("criterion tests failed", 2), ("failed: turn budget exhausted", 1)]
    variants = client.get("/api/experiments").json()["experiments"][0]["variants"]
    assert [(r["reason"], r["count"]) for r in variants[0]["failure_reasons"]] == [
        ("criterion tests failed", 2), ("failed: turn budget exhausted", 1)]


def test_a_failed_run_whose_gate_lacks_a_result_is_counted_under_that_criterion(tmp_path, ingest, client):
    # coder_eval's gate reads a gating criterion it did not evaluate as 0 (all_criteria_passed
    # compares its score, 0.0 by default): a FAILURE whose other criteria passed was
    # counted under its stop detail, "final_result is set".
    recs = run_records("gap", stop_reason="final", stop_detail="final_result is set",
                       criteria=[{"id": "tests"}, {"id": "judge"}, {"id": "style", "gating": False}],
                       results=[{"id": "tests", "score": 1.0, "passed": True}])
    recs[-1].update(verdict="fail")
    # an error keeps its own account: its criteria have no result because it crashed
    crash = run_records("crash", stop_reason="unrecoverable_error", stop_detail="process exited with code 1",
                        criteria=[{"id": "tests"}])
    crash[-1].update(verdict="error")
    assert ingest(write_jsonl(tmp_path / "g.jsonl", recs + crash)).ok
    stats = client.get("/api/runs").json()["stats"]
    assert sorted((f["reason"], f["count"]) for f in stats["top_failures"]) == [
        ("criterion judge has no result", 1), ("process exited with code 1", 1)]
