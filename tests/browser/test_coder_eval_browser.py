"""A real coder_eval experiment in real Chromium: a run read as coder_eval reports it, and
the smoke-vs-e2e comparison on the agent's own time.

Reads `../shared/traces/coder_eval-runs/` at test time; expected values come from the
task.json files themselves. Results crafted from coder_eval's documented schema
(tests/app/test_coder_eval_schema.py) show what that experiment does not: a field of the
wrong type said on its run, a cost that is a floor, turns without messages, a 0% night.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.app.test_coder_eval import RESULTS, expected_runs, needs_shared


@needs_shared
def test_a_budget_breach_run_reads_as_coder_eval_reports_it(live_server, page, ingest):
    assert ingest(RESULTS.parent).ok
    real = expected_runs(RESULTS.parent)
    run_id, want = next((rid, w) for rid, w in real.items()
                        if w["status"] == "TOKEN_BUDGET_EXCEEDED" and w["early_stop"])
    page.goto(live_server.url + "/runs/" + quote(run_id, safe=""))
    header = page.locator(".run-head")
    assert header.locator(".badge.source-status").inner_text() == "coder_eval: TOKEN_BUDGET_EXCEEDED"
    assert header.locator(".badge.verdict").inner_text().strip() == "✗ fail"
    reason = header.locator(".verdict-reason").inner_text()
    assert "failed: token budget exceeded" in reason and want["task"]["error_message"] in reason
    assert "the criteria alone say pass" in reason
    tokens = header.locator(".run-tokens").inner_text()
    assert tokens.startswith(f"{want['tokens']:,} = {want['uncached']:,} uncached input")
    assert f"{want['cache_read']:,} cache read" in tokens and f"{want['output']:,} output" in tokens
    assert header.locator(".run-time").inner_text().startswith("agent ")
    # the step budget gauge counts assistant turns against max_turns
    gauge = header.locator(".gauge").first.inner_text()
    assert f"{want['turns']} of {want['max_turns']}" in gauge
    # one step per assistant turn; the call that decided the stop says it did not complete
    assert page.locator("#steps article.step").count() == want["turns"]
    step = want["early_stop"]["sdk_turn_index"]
    page.locator(".early-panel a.step-ref").click()
    page.wait_for_url(f"**#step-{step}")
    last = page.locator(f"#step-{step}")
    assert "the run was stopped early during this call" in last.locator(".call-note").inner_text()
    commands = [c["parameters"]["command"] for it in want["task"]["iterations"] for c in it["commands"]]
    assert commands[-1] in last.locator(".actions").inner_text()
    assert page.errors == []


@needs_shared
def test_compare_counts_time_saved_on_the_agents_own_time(live_server, page, ingest):
    assert ingest(RESULTS.parent).ok
    exp = json.loads((RESULTS.parent / "experiment.json").read_text())
    page.goto(f"{live_server.url}/compare?experiment={quote(exp['experiment_id'])}&a=smoke&b=e2e")
    real = expected_runs(RESULTS.parent)
    keys = {(w["task_id"], w["replicate"]) for w in real.values() if w["variant"] == "smoke"} & \
           {(w["task_id"], w["replicate"]) for w in real.values() if w["variant"] == "e2e"}
    pick = {v: {(w["task_id"], w["replicate"]): w for w in real.values() if w["variant"] == v} for v in ("smoke", "e2e")}
    a = sum(pick["smoke"][k]["agent_s"] for k in keys)
    b = sum(pick["e2e"][k]["agent_s"] for k in keys)
    headline = page.locator("#headline").inner_text()
    assert f"{round(100 * (b - a) / b)}% less agent time" in headline
    labels = page.locator("svg.bars .bar-label").all_text_contents()
    assert labels == ["steps", "tool calls", "tokens", "cost", "agent cost", "agent time", "end to end"]
    # the agent's slice of the bill, from run.json's rows (agent_cost_usd)
    agent_a = sum(pick["smoke"][k]["agent_cost"] for k in keys)
    values = page.locator("svg.bars .bar-value").all_text_contents()
    assert f"smoke ${agent_a:,.4f}" in values
    # the errored pair is counted as errored, not as having run to the end
    early = page.locator("table.early-breakdown").inner_text()
    errored = sum(1 for k in keys if pick["smoke"][k]["verdict"] == "error" and not pick["smoke"][k]["early_stop"])
    assert errored and f"errored (no gradeable attempt)\t{errored}" in early
    assert page.errors == []


pytestmark = pytest.mark.browser


def test_a_weighted_gate_pass_says_what_it_needed(live_server, page, ingest, tmp_path):
    from tests.app.test_coder_eval import weighted_gate_results

    assert ingest(weighted_gate_results(tmp_path)).ok
    page.goto(live_server.url + "/runs/" + quote("wg/smoke/w1/00", safe=""))
    header = page.locator(".run-head")
    assert header.locator(".badge.verdict").inner_text().strip() == "✓ pass"
    assert " ".join(header.locator(".gated").inner_text().split()) == \
        "gated on armed criteria only (weighted: 50% of their weight needed) · recorded by the run"
    assert "criteria alone say" not in header.inner_text()
    assert page.errors == []


@needs_shared
def test_the_overview_gives_coder_evals_own_pass_rate_by_task(live_server, page, ingest):
    # variant.json counts each task once (replicates of one task are one outcome there);
    # the row says so beside the pass rate by run, at desktop and at phone width.
    assert ingest(RESULTS.parent).ok
    exp = json.loads((RESULTS.parent / "experiment.json").read_text())
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/")
        for variant, agg in exp["variant_aggregates"].items():
            row = page.locator(f"tr.variant-row[data-variant='{variant}']")
            succeeded, run = agg["tasks_succeeded"], agg["tasks_run"]
            assert row.locator(".by-task").inner_text() == f"by task: {round(100 * succeeded / run)}% ({succeeded} of {run})"
            assert row.locator(".runs-tasks").inner_text() == f"of {run} tasks"
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []


def test_the_overview_folds_disagreeing_replicates_to_the_worst_verdict(live_server, page, ingest, tmp_path):
    from tests.app.test_coder_eval_schema import FOLDED, fold_experiment

    assert ingest(fold_experiment(tmp_path / "2026-09-09_09-09-09")).errors == []
    passed = list(FOLDED.values()).count("SUCCESS")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/")
        by_task = page.locator("tr.variant-row[data-variant='smoke'] .by-task")
        assert by_task.inner_text() == (f"by task: {round(100 * passed / len(FOLDED))}% ({passed} of {len(FOLDED)}); "
                                        "3 tasks with replicates that disagree, each counted by its worst verdict")
        assert "is an error when any errored" in by_task.get_attribute("title")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []


def test_compare_names_the_runs_a_budget_cut_apart_from_those_that_ran_to_the_end(live_server, page, ingest, tmp_path):
    from tests.app.test_coder_eval_schema import budget_cut_experiment

    assert ingest(budget_cut_experiment(tmp_path / "2026-10-10_10-10-10")).errors == []
    page.goto(f"{live_server.url}/compare?experiment=cut&a=smoke&b=e2e")
    rows = {" ".join(r.locator("th").inner_text().split()): r.locator("td").inner_text()
            for r in page.locator("table.early-breakdown tr").all()}
    assert rows["cut by a budget (steps, time, tokens or cost)"] == "2"
    assert rows["errored (no gradeable attempt)"] == "1"
    assert rows["ran to the end"] == "1"
    assert page.errors == []


def test_what_a_crafted_coder_eval_folder_says_reads_in_chromium(live_server, page, ingest, tmp_path):
    # Results written from coder_eval's documented schema (tests/app/test_coder_eval_schema):
    # a field of the wrong type is said on its run's page; a TIMEOUT's cost is a lower
    # bound; an agent that surfaces no messages has the 3 turns coder_eval counted; one that
    # surfaced no usage has no tokens (not 0); a night
    # whose every task errored without a score, none ungraded, is coder_eval's 0%.
    from tests.app.test_coder_eval_schema import command, task, turns_of, write

    root = tmp_path / "crafted"
    write(root, task("odd", weighted_score="high"))
    write(root, task("killed", status="TIMEOUT", score=0.0))
    write(root, task("killed", variant="w"))  # its twin, for the side-by-side page
    quiet = {"iteration": 1, "user_input": "go", "agent_output": "done", "duration_seconds": 1.0,
             "assistant_turn_count": 3, "messages": [], "commands": [command("a", 0), command("b", 2)],
             "token_usage": turns_of(1)["token_usage"]}
    write(root, task("quiet", iterations=[quiet]))
    # the SDK surfaced no usage: the messages' zero buckets are defaults, so tokens are unknown
    mute = dict(quiet, token_usage=None, messages=[
        {"role": "assistant", "content_blocks": [{"block_type": "text", "text": "hi"}], "tool_use_ids": [],
         "input_tokens": 0, "output_tokens": 0, "cache_creation_tokens": 0, "cache_read_tokens": 0}])
    write(root, task("mute", iterations=[mute], total_token_usage=None))
    for name in ("e1", "e2"):
        write(root, task(name, variant="infra", status="ERROR", score=None, success_criteria_results=[]))
    assert ingest(root).errors == []

    page.goto(live_server.url + "/runs/" + quote("crafted/v/odd/00", safe=""))
    warnings = page.locator(".run-head ul.warnings li").all_inner_texts()
    assert warnings == ["⚠ task.json: field 'weighted_score' should be a number or null, not a string ('high'); "
                        "read as not given, the rest kept"]

    page.goto(live_server.url + "/runs/" + quote("crafted/v/killed/00", safe=""))
    assert page.locator(".run-head .run-cost").inner_text() == "$0.0100 (lower bound)"
    page.goto(live_server.url + "/pair?a=" + quote("crafted/v/killed/00", safe=""))
    assert page.locator(".pair-side .pair-cost").all_inner_texts() == ["cost $0.0100 (lower bound)", "cost $0.0100"]

    page.goto(live_server.url + "/runs/" + quote("crafted/v/quiet/00", safe=""))
    assert page.locator("#steps article.step").count() == 3

    page.goto(live_server.url + "/runs/" + quote("crafted/v/mute/00", safe=""))
    assert page.locator(".run-head .run-tokens").inner_text() == "—"

    page.goto(live_server.url + "/")
    row = page.locator("tr.variant-row[data-variant='infra']")
    assert row.locator(".pass-rate b").inner_text() == "0%"
    assert row.locator(".not-measured").count() == 0
    assert page.errors == []


def test_compare_in_chromium_shows_the_agents_cost_and_says_a_total_is_a_lower_bound(live_server, page, ingest,
                                                                                       tmp_path):
    # Agent 0.05 against 0.10 with a 0.05 judge on each side; the smoke side of t2 priced one
    # turn of two (cost_complete false), so both cost totals are lower bounds.
    from tests.app.test_coder_eval_schema import PRICED, task, turns_of, write

    root = tmp_path / "2026-03-05_03-03-03"
    judge = {"criterion_type": "llm_judge", "description": "reads well", "score": 1.0,
             "token_usage": {**PRICED, "total_cost_usd": 0.05}}
    for variant, agent in (("smoke", 0.05), ("e2e", 0.10)):
        usage = {**PRICED, "total_cost_usd": agent}
        write(root, task("t1", variant, success_criteria_results=[judge], total_token_usage=usage,
                         iterations=[dict(turns_of(1), token_usage=usage)]))
    write(root, task("t2", "smoke", iterations=[turns_of(1), dict(turns_of(1), token_usage={**PRICED,
                                                                                        "total_cost_usd": None})]))
    write(root, task("t2", "e2e"))
    assert ingest(root).errors == []
    page.goto(f"{live_server.url}/compare?experiment={quote(root.name)}&a=smoke&b=e2e")
    labels = page.locator("svg.bars .bar-label").all_text_contents()
    assert labels[3:5] == ["cost", "agent cost"]
    values = page.locator("svg.bars .bar-value").all_text_contents()
    # bill: 0.10 + 0.01 against 0.15 + 0.01; agent: 0.05 + 0.01 against 0.10 + 0.01
    assert values[6:10] == ["smoke $0.1100", "e2e $0.1600", "smoke $0.0600", "e2e $0.1100"]
    notes = page.locator(".cost-floor-note").all_inner_texts()
    assert [n.split(":")[0] for n in notes] == ["cost", "agent cost"]
    assert all("1 pair(s) with a cost that is a lower bound" in n for n in notes)
    # the overview's median cost says it is over a lower bound, on the smoke row only
    page.goto(live_server.url + "/")
    assert page.locator("tr.variant-row[data-variant='smoke'] .cost-floor-note").inner_text() == "1 lower bound"
    assert page.locator("tr.variant-row[data-variant='e2e'] .cost-floor-note").count() == 0
    assert page.errors == []


def test_compare_of_an_execute_night_says_it_measured_no_verdict(live_server, page, ingest, tmp_path):
    from tests.app.test_coder_eval import task_jsons

    root = tmp_path / "execute-night"
    task_jsons(root, "smoke", {"t1": "NOT_GRADED", "t2": "error"})
    task_jsons(root, "e2e", {"t1": "SUCCESS", "t2": "FAILURE"})
    assert ingest(root).ok
    page.goto(f"{live_server.url}/compare?experiment=execute-night&a=smoke&b=e2e")
    note = page.locator(".unmeasured")
    assert note.inner_text().startswith("smoke measured no verdict: its runs were run without grading")
    assert "2 not graded left out (smoke measured no verdict" in page.locator("#headline").inner_text()
    assert page.locator("#agreement").count() == 0  # no agreement rate over nothing measured
    assert page.errors == []


def test_a_dialog_and_a_time_out_read_their_stop_and_gauges_in_chromium(live_server, page, ingest, tmp_path):
    from tests.app.test_coder_eval_schema import _dialog, task, turns_of, write

    root = tmp_path / "gauges"
    write(root, _dialog("max_turns"))
    write(root, task("slow", status="TIMEOUT", score=0.0, duration_seconds=605.0,
                     iterations=[{**turns_of(2), "duration_seconds": 40.0}],
                     task_config={"resolved": {"run_limits": {"task_timeout": 600}}}))
    write(root, task("call", status="TIMEOUT", score=0.0, duration_seconds=318.0,
                     iterations=[{**turns_of(2), "duration_seconds": 10.0}],
                     task_config={"resolved": {"run_limits": {"task_timeout": 600, "turn_timeout": 300}}},
                     success_criteria_results=[]))
    assert ingest(root).ok
    page.goto(live_server.url + "/runs/" + quote("gauges/v/d-max_turns/00", safe=""))
    head = page.locator(".run-head")
    assert "env terminal" in head.inner_text()
    assert "the dialog reached its max_turns of user↔agent exchanges" in head.inner_text()
    steps = head.locator(".gauge").first
    assert steps.locator(".gauge-label").inner_text() == "steps (longest call)"
    assert steps.locator(".gauge-text").inner_text().startswith("5 of 6 (83%)")
    page.goto(live_server.url + "/runs/" + quote("gauges/v/slow/00", safe=""))
    time = page.locator(".run-head .gauge", has_text="time (end to end)")
    assert time.locator(".gauge-text").inner_text().startswith("10 min 5 s of 10 min 0 s (101%)")
    assert time.get_attribute("class").split() == ["gauge", "gauge-over"]
    assert "stopped it" not in time.inner_text()
    # stopped for time at half of task_timeout: turn_timeout is named beside the gauge
    page.goto(live_server.url + "/runs/" + quote("gauges/v/call/00", safe=""))
    time = page.locator(".run-head .gauge", has_text="time (end to end)")
    assert time.locator(".gauge-text").inner_text().startswith("5 min 18 s of 10 min 0 s (53%)")
    assert time.locator(".gauge-text .muted").inner_text().endswith(
        "the time limit that stopped it is each agent call's limit, 5 min 0 s")
    # it timed out before any criterion was graded: its fail is how it ended, not "not graded"
    assert page.locator("p.no-criteria").inner_text() == (
        "This run declares no success criteria: its verdict, fail, says how it ended (TIMEOUT), not what a criterion found.")
    assert page.errors == []


def test_an_uploaded_results_folder_with_a_cut_run_json_says_so_and_keeps_its_tasks(live_server, page, tmp_path):
    import io
    import zipfile

    from tests.app.test_coder_eval_schema import task, write

    root = tmp_path / "2026-11-11_11-11-11"
    write(root, task("t1"))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(root / "v" / "t1" / "00" / "task.json", f"{root.name}/v/t1/00/task.json")
        zf.writestr(f"{root.name}/run.json", '{"run_id": "2026-11-11_11-11-11", "task_res')
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "night.zip", "mimeType": "application/zip", "buffer": buf.getvalue()}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()
    rejected = page.locator(".upload-result ul.rejected li").all_inner_texts()
    assert len(rejected) == 1 and f"{root.name}/run.json" in rejected[0]
    assert "could not read this run.json (invalid JSON" in rejected[0]
    assert "each row's bill and cost_complete" in rejected[0]
    assert page.locator(".runs-created a").all_inner_texts() == [f"{root.name}/v/t1/00"]
    assert page.errors == []


def test_the_overview_counts_the_latest_run_of_an_experiment_run_again(live_server, page, ingest, tmp_path):
    from tests.app.test_overview import _run
    from tests.conftest import write_jsonl

    recs = []
    for day, second, passed in (("d1", 1, True), ("d2", 30, False)):
        recs += _run(f"{day}-e", experiment="again", variant="e2e", task="t1", passed=passed, second=second)
    recs += _run("s", experiment="again", variant="smoke", task="t1", passed=True, second=2)
    assert ingest(write_jsonl(tmp_path / "again.jsonl", recs)).ok
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/")
        row = page.locator("tr.variant-row[data-variant='e2e']")
        assert row.locator(".set-aside").inner_text() == "and 1 older, set aside"
        assert "a later run of the same variant replaces" in row.locator(".set-aside").get_attribute("title")
        assert row.locator(".pass-rate b").inner_text() == "0%"                  # day 2's fail, not 1 of 2
        assert page.locator("section.experiment .set-aside").first.inner_text() == "(and 1 older, set aside)"
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []


def test_an_uploaded_task_json_cut_short_keeps_its_run_from_the_run_json_row(live_server, page, tmp_path):
    import io
    import zipfile

    import orjson

    from tests.app.test_coder_eval_schema import task

    name = "2026-11-12_12-12-12"
    row = {"task_id": "t1", "replicate_index": 0, "variant_id": "v", "status": "FAILURE", "weighted_score": 0.5,
           "total_cost_usd": 0.25, "total_turns": 3}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{name}/v/t1/00/task.json", orjson.dumps(task("t1"))[:50])
        zf.writestr(f"{name}/run.json", orjson.dumps({"run_id": name, "task_results": [row]}))
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "night.zip", "mimeType": "application/zip", "buffer": buf.getvalue()}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()
    rejected = page.locator(".upload-result ul.rejected li").all_inner_texts()
    assert len(rejected) == 1 and rejected[0].startswith(f"night.zip/{name}/v/t1/00/task.json: invalid JSON")
    assert rejected[0].endswith("; its run.json row is read instead")
    page.locator(".runs-created a").click()
    page.wait_for_url("**/runs/**")
    header = page.locator(".run-head")
    assert header.locator(".badge.verdict").inner_text().strip() == "✗ fail"
    assert "its task.json could not be read: the run is its run.json row" in page.locator("main").inner_text()
    assert page.errors == []


@needs_shared
def test_a_runs_start_reads_as_coder_eval_wrote_it(live_server, page, ingest):
    # coder_eval's times are its machine's local clock, with no zone: shown as written, not as UTC
    assert ingest(RESULTS.parent).ok
    run_id, want = next(iter(expected_runs(RESULTS.parent).items()))
    page.goto(live_server.url + "/runs/" + quote(run_id, safe=""))
    started = page.locator(".run-head .meta time").first
    assert started.inner_text() == want["task"]["started_at"].replace("T", " ")[:19]
    assert "UTC" not in started.inner_text()
    # the overview's latest activity too: the last task's end, as written (it said "… UTC")
    runs = expected_runs(RESULTS.parent).values()
    last = max((r["task"]["completed_at"] or r["task"]["started_at"]) for r in runs).replace("T", " ")[:19]
    page.goto(live_server.url + "/")
    assert page.locator(".experiment-head time, section time").first.inner_text() == last
    assert "UTC" not in page.locator("main").inner_text()
    assert page.errors == []
