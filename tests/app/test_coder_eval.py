"""coder_eval results read as coder_eval means them.

The real experiment in `../shared/traces/coder_eval-runs/` (written by coder_eval 0.12.16)
is read at test time. Every expected figure is worked out here from its task.json and
run.json files by coder_eval's documented rules (its REPORT_SCHEMA.md), never with the
importer's code: FinalStatus categories for verdicts, token buckets summed once, the
run.json row for the bill and the agent's wall time, `total_assistant_turns` for steps,
`iterations[].commands` for tool calls. Fixture folders of this file's own cover the
older layout and paths that hold nothing.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

import orjson
import pytest
from sqlmodel import Session

from qita_board.queries import run_detail

pytestmark = pytest.mark.both_backends

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces" / "coder_eval-runs"
RESULTS = next(iter(sorted(SHARED.glob("*/run.json"))), None)
needs_shared = pytest.mark.skipif(RESULTS is None, reason="../shared/traces/coder_eval-runs is not on this machine")

# coder_eval's FinalStatus -> reporting category (REPORT_SCHEMA.md, "FinalStatus").
CATEGORY = {"SUCCESS": "succeeded", "FAILURE": "failed", "TIMEOUT": "failed", "MAX_TURNS_EXHAUSTED": "failed",
            "TOKEN_BUDGET_EXCEEDED": "failed", "COST_BUDGET_EXCEEDED": "failed", "ERROR": "error",
            "BUILD_FAILED": "error", "NOT_GRADED": "ungraded"}
BOARD_VERDICT = {"succeeded": "pass", "failed": "fail", "error": "error", "ungraded": "not_graded"}


# -- what coder_eval itself says, per task.json ---------------------------------------------

def expected_runs(results: Path) -> dict[str, dict[str, Any]]:
    """Per task.json, the figures coder_eval reports, keyed by the board's run id."""
    run = json.loads((results / "run.json").read_text())
    rows = {(r["variant_id"], r["task_id"], r["replicate_index"]): r for r in run["task_results"]}
    out = {}
    for path in sorted(results.glob("*/*/*/task.json")):
        task = json.loads(path.read_text())
        variant, task_dir, rep = path.parts[-4], path.parts[-3], path.parts[-2]
        row = rows[(task["variant_id"], task["task_id"], int(rep))]
        usage = task["total_token_usage"]
        es = task["early_stop"]
        out[f"{run['run_id']}/{variant}/{task_dir}/{rep}"] = {
            "task": task,
            "task_id": task["task_id"],
            "variant": variant,
            "replicate": int(rep),
            "status": task["final_status"],
            "verdict": BOARD_VERDICT[CATEGORY[task["final_status"]]],
            # "sum the buckets": uncached input, output and both cache buckets, each once
            "tokens": usage["uncached_input_tokens"] + usage["output_tokens"]
            + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"],
            "uncached": usage["uncached_input_tokens"],
            "cache_read": usage["cache_read_input_tokens"],
            "cache_write": usage["cache_creation_input_tokens"],
            "output": usage["output_tokens"],
            "cost": row["total_cost_usd"],
            "agent_cost": row["agent_cost_usd"],
            "turns": task["total_assistant_turns"],
            "tool_calls": sum(len(it["commands"]) for it in task["iterations"]),
            "agent_s": row["agent_wall_ms"] / 1000,
            "elapsed_s": task["duration_seconds"],
            "early_stop": es,
            "model": task["model_used"],
            "objective": task["task_description"],
            "max_turns": task["task_config"]["resolved"]["run_limits"]["max_turns"],
        }
    return out


@pytest.fixture
def real(ingest):
    assert RESULTS is not None
    report = ingest(RESULTS.parent)
    assert report.errors == []
    return expected_runs(RESULTS.parent)


def _api_run(client, run_id: str) -> dict[str, Any]:
    response = client.get("/api/runs/" + quote(run_id, safe=""))
    assert response.status_code == 200, response.text
    return response.json()


@needs_shared
def test_every_run_has_the_verdict_tokens_cost_and_turns_coder_eval_reports(real, engine):
    assert len(real) == json.loads((RESULTS.parent / "run.json").read_text())["tasks_run"]
    with Session(engine) as session:
        for run_id, want in real.items():
            row = run_detail.get_run_row(session, run_id=run_id)
            assert row is not None, run_id
            got = {k: row[k] for k in ("verdict", "source_status", "tokens_total", "tokens_cache_read",
                                       "tokens_cache_write", "tokens_output", "steps", "tool_calls", "model",
                                       "objective", "task_id", "variant", "replicate")}
            assert got == {"verdict": want["verdict"], "source_status": want["status"], "tokens_total": want["tokens"],
                           "tokens_cache_read": want["cache_read"], "tokens_cache_write": want["cache_write"],
                           "tokens_output": want["output"], "steps": want["turns"], "tool_calls": want["tool_calls"],
                           "model": want["model"], "objective": want["objective"], "task_id": want["task_id"],
                           "variant": want["variant"], "replicate": want["replicate"]}, run_id
            # input holds the uncached input and both caches once: input + output = total
            assert row["tokens_input"] == want["uncached"] + want["cache_read"] + want["cache_write"]
            assert row["cost_usd"] == pytest.approx(want["cost"]) and row["agent_cost_usd"] == pytest.approx(want["agent_cost"])
            assert row["agent_elapsed_s"] == pytest.approx(want["agent_s"])
            assert row["elapsed_s"] == pytest.approx(want["elapsed_s"])
            assert row["budget_max_steps"] == want["max_turns"]
            assert row["early_stopped"] is (want["early_stop"] is not None)


@needs_shared
def test_a_budget_breach_fails_whatever_the_criteria_said_and_the_page_says_why(real, client):
    breached = {rid: w for rid, w in real.items() if w["status"] == "TOKEN_BUDGET_EXCEEDED"}
    assert breached
    for run_id, want in breached.items():
        data = _api_run(client, run_id)
        run = data["run"]
        assert run["verdict"] == "fail"
        assert run["verdict_reason"].startswith("failed: token budget exceeded")
        assert want["task"]["error_message"] in run["verdict_reason"]
        page = client.get("/runs/" + quote(run_id, safe="")).text
        assert "failed: token budget exceeded" in page and "TOKEN_BUDGET_EXCEEDED" in page
    # the e2e run of the token-hungry task: its gating criteria all passed, the status still wins
    e2e = next(w for w in breached.values() if w["variant"] == "e2e")
    gating = [c for c in e2e["task"]["success_criteria_results"] if c["gating"]]
    assert all(c["score"] >= c["pass_threshold"] for c in gating)
    run_id = next(rid for rid, w in breached.items() if w is e2e)
    assert _api_run(client, run_id)["run"]["criteria_verdict"] == "pass"


@needs_shared
def test_steps_are_assistant_turns_with_their_tool_calls_and_tokens_add_up(real, client):
    for run_id, want in real.items():
        steps = client.get("/api/runs/" + quote(run_id, safe="") + "/steps", params={"limit": 200}).json()["data"]
        assert [s["step"] for s in steps] == list(range(1, want["turns"] + 1)), run_id
        commands = [c for it in want["task"]["iterations"] for c in it["commands"]]
        calls = [(a["name"], a["args"]) for s in steps for a in s["record"]["actions"]]
        assert calls == [(c["tool_name"], c["parameters"]) for c in commands], run_id
        # coder_eval's token invariant: the messages' buckets add up to the turn's usage
        assert sum(s["tokens"]["total"] for s in steps) == want["tokens"], run_id
        statuses = [r["status"] for s in steps for r in s["record"]["action_results"]]
        assert statuses == [c["result_status"] for c in commands]


@needs_shared
def test_early_stop_lines_up_with_the_steps_shown(real, client):
    stopped = {rid: w for rid, w in real.items() if w["early_stop"]}
    assert stopped
    for run_id, want in stopped.items():
        es = want["early_stop"]
        data = _api_run(client, run_id)
        early = data["early_stop"]
        assert early["reason"] == es["reason"]
        assert early["step"] == es["sdk_turn_index"] == data["run"]["steps"]
        assert early["tool_call_index"] == es["tool_call_index"]
        assert early["turns_remaining"] == es["turns_remaining_at_stop"] == want["max_turns"] - es["sdk_turn_index"]
        assert early["armed_criteria"] == es["armed_criteria"]
        assert early["deciding_criterion"] == f"{es['deciding_criterion_type']}: {es['deciding_criterion_description']}"
        assert early["record"]["gate_threshold"] == es["gate_threshold"]
        # the call that decided the stop sits in the step the stop names
        steps = client.get("/api/runs/" + quote(run_id, safe="") + "/steps", params={"limit": 200}).json()["data"]
        holder = next(s for s in steps if any(t.get("call_index") == es["tool_call_index"]
                                              for t in s["record"]["tool_invocations"]))
        assert holder["step"] == es["sdk_turn_index"]
        armed = {c["id"] for c in data["criteria"] if c["armed"]}
        assert armed == set(es["armed_criteria"])
        advisory = {c["id"] for c in data["criteria"] if c["advisory"]}
        gating = {f"{c['criterion_type']}: {c['description']}" for c in want["task"]["success_criteria_results"]
                  if c["gating"]}
        assert advisory == gating - armed


@needs_shared
def test_a_call_coder_eval_never_saw_run_has_no_result_and_is_no_failure(real, client):
    # coder_eval latches an early stop on a tool call's start: it records that call with
    # result_status "unknown", no execution times and "no result observed". It did not fail.
    unseen = 0
    for run_id, want in real.items():
        commands = [c for it in want["task"]["iterations"] for c in it["commands"]]
        steps = client.get("/api/runs/" + quote(run_id, safe="") + "/steps", params={"limit": 200}).json()["data"]
        results = [r for s in steps for r in s["record"]["action_results"]]
        invocations = [i for s in steps for i in s["record"]["tool_invocations"]]
        for c, r, inv in zip(commands, results, invocations, strict=True):
            if c["result_status"] == "unknown" and c["execution_started_at"] is None:
                unseen += 1
                assert r["error"] is None and inv["error"] is None and r["status"] == "unknown"
                assert r["note"].startswith(c["error_message"])
            else:
                assert r["error"] == c["error_message"]
        errors = client.get("/api/runs/" + quote(run_id, safe="") + "/steps",
                            params={"limit": 200, "only": "errors"})
        if errors.status_code == 200:
            flagged = {s["step"] for s in errors.json()["data"]}
            # only steps holding a call coder_eval saw fail, or a crashed iteration's last turn
            failing = any(c["result_status"] == "error" for c in commands) or want["status"] == "ERROR"
            assert bool(flagged) == failing, run_id
    assert unseen >= sum(1 for w in real.values() if w["early_stop"])


@needs_shared
def test_compare_flags_on_the_real_experiment_equal_a_hand_reading(real, client):
    # Worked out from the task.json files: a smoke run that stopped early and passed is a
    # premature pass for each gating criterion that failed in its e2e pair while it was not
    # failing (advisory, or armed and undecided) in smoke; no deciding call failed (every
    # deciding call is one coder_eval never saw run).
    by_key = {(w["variant"], w["task_id"], w["replicate"]): w for w in real.values()}
    want: dict[tuple[str, int], set[str]] = {}
    for (variant, task_id, rep), a in by_key.items():
        b = by_key.get(("e2e", task_id, rep))
        if variant != "smoke" or b is None:
            continue
        flagged: set[str] = set()
        if a["early_stop"] and a["verdict"] == "pass":
            failed_a = {f"{c['criterion_type']}: {c['description']}" for c in a["task"]["success_criteria_results"]
                        if c["score"] < c["pass_threshold"]}
            deciding = f"{a['early_stop']['deciding_criterion_type']}: {a['early_stop']['deciding_criterion_description']}"
            for c in b["task"]["success_criteria_results"]:
                cid = f"{c['criterion_type']}: {c['description']}"
                if c["gating"] and c["score"] < c["pass_threshold"] and cid not in failed_a and cid != deciding:
                    flagged.add(f"premature_pass:{cid}")
        want[(task_id, rep)] = flagged
    exp = json.loads((RESULTS.parent / "experiment.json").read_text())
    data = client.get("/api/compare", params={"experiment": exp["experiment_id"], "a": "smoke", "b": "e2e"}).json()
    got = {(p["task_id"], p["replicate"]): {f"{f['kind']}:{f.get('criterion', '')}".rstrip(":") for f in p["flags"]}
           for p in data["pairs"]}
    assert got == want
    assert any(want.values())  # the experiment has a premature pass to find (t03: pushed in e2e)
    assert "deciding_call_failed" not in data["summary"]["flags"]


@needs_shared
def test_a_crashed_run_is_an_error_with_its_retried_iterations_shown(real, client):
    crashed = {rid: w for rid, w in real.items() if w["status"] == "ERROR"}
    assert crashed
    for run_id, want in crashed.items():
        run = _api_run(client, run_id)["run"]
        assert run["verdict"] == "error" and run["status"] == "error"
        assert want["task"]["error_message"] in run["verdict_reason"]
        steps = client.get("/api/runs/" + quote(run_id, safe="") + "/steps", params={"limit": 200}).json()["data"]
        iterations = want["task"]["iterations"]
        crashed_its = [i for i, it in enumerate(iterations) if it["crashed"]]
        assert sum(1 for s in steps if s["record"].get("crashed")) == len(crashed_its)
        # every iteration after a crash starts with a retried step
        assert run["retries"] == sum(1 for i in crashed_its if i + 1 < len(iterations))
        # not graded, but the criteria its task declares are still its criteria
        configured = [f"{c['type']}: {c['description']}" for c in want["task"]["task_config"]["resolved"]["success_criteria"]]
        criteria = _api_run(client, run_id)["criteria"]
        assert want["task"]["success_criteria_results"] == [] and [c["id"] for c in criteria] == configured
        assert all(c["declared"] and not c["graded"] for c in criteria)


@needs_shared
def test_run_list_figures_equal_run_json(real, client):
    summary = json.loads((RESULTS.parent / "run.json").read_text())
    stats = client.get("/api/runs", params={"limit": 500}).json()["stats"]
    assert stats["runs"] == summary["tasks_run"]
    assert stats["passed"] == summary["tasks_succeeded"]
    assert stats["failed"] == summary["tasks_failed"]
    assert stats["errored"] == summary["tasks_error"]
    assert stats["graded"] == summary["tasks_graded"]
    assert stats["pass_rate"] == pytest.approx(summary["pass_rate"])


@needs_shared
def test_each_variant_totals_equal_experiment_json(real, client):
    exp = json.loads((RESULTS.parent / "experiment.json").read_text())
    for variant, agg in exp["variant_aggregates"].items():
        data = client.get("/api/runs", params={"experiment": exp["experiment_id"], "variant": variant,
                                               "limit": 500}).json()
        assert sum(r["tokens_total"] for r in data["data"]) == agg["total_tokens"]
        assert len({r["task_id"] for r in data["data"]}) == agg["tasks_run"]
        # the aggregate counts tasks; where a task's replicates agree they are one outcome
        by_task: dict[str, set[str]] = {}
        for r in data["data"]:
            by_task.setdefault(r["task_id"], set()).add(r["verdict"])
        assert all(len(v) == 1 for v in by_task.values())
        outcome = [next(iter(v)) for v in by_task.values()]
        assert (outcome.count("pass"), outcome.count("fail"), outcome.count("error")) == (
            agg["tasks_succeeded"], agg["tasks_failed"], agg["tasks_error"])
    # the overview's figure by task is coder_eval's own variant pass_rate
    shown = {v["variant"]: v for e in client.get("/api/experiments").json()["experiments"] for v in e["variants"]}
    for variant, agg in exp["variant_aggregates"].items():
        v = shown[variant]
        assert (v["tasks"], v["tasks_passed"], v["tasks_failed"], v["tasks_error"], v["tasks_mixed"]) == (
            agg["tasks_run"], agg["tasks_succeeded"], agg["tasks_failed"], agg["tasks_error"], 0)
        assert v["task_pass_rate"] == pytest.approx(agg["pass_rate"])


def _hand_compare(real: dict[str, dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Pairs by (task, replicate); pass against a miss (fail or error); totals over pairs."""
    side = {v: {(w["task_id"], w["replicate"]): w for w in real.values() if w["variant"] == v} for v in (a, b)}
    keys = sorted(side[a].keys() & side[b].keys())
    out: dict[str, Any] = {"paired": len(keys), "only_a": sorted(k[0] for k in side[a].keys() - side[b].keys())}
    conf = {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0, "fail_fail": 0}
    for k in keys:
        va = "pass" if side[a][k]["verdict"] == "pass" else "fail"
        vb = "pass" if side[b][k]["verdict"] == "pass" else "fail"
        conf[f"{va}_{vb}"] += 1
    out["confusion"] = conf
    out["agree"] = conf["pass_pass"] + conf["fail_fail"]
    for name, key in (("steps", "turns"), ("tool_calls", "tool_calls"), ("tokens", "tokens"), ("cost_usd", "cost"),
                      ("agent_cost_usd", "agent_cost"), ("agent_s", "agent_s"), ("elapsed_s", "elapsed_s")):
        ta = sum(side[a][k][key] for k in keys)
        tb = sum(side[b][k][key] for k in keys)
        out[name] = (ta, tb, 100 * (tb - ta) / tb)
    out["early_a"] = sum(1 for k in keys if side[a][k]["early_stop"])
    out["errored_a"] = sum(1 for k in keys if side[a][k]["verdict"] == "error" and not side[a][k]["early_stop"])
    # cut by a budget: REPORT_SCHEMA's FinalStatus values for a breached limit, or turns run out
    budget = {"TIMEOUT", "MAX_TURNS_EXHAUSTED", "TOKEN_BUDGET_EXCEEDED", "COST_BUDGET_EXCEEDED"}
    out["cut_a"] = sum(1 for k in keys if not side[a][k]["early_stop"] and side[a][k]["verdict"] != "error"
                       and (side[a][k]["status"] in budget or side[a][k]["task"].get("max_turns_exhausted") is True))
    return out


@needs_shared
def test_compare_summary_equals_a_hand_computation(real, client):
    exp = json.loads((RESULTS.parent / "experiment.json").read_text())
    want = _hand_compare(real, "smoke", "e2e")
    data = client.get("/api/compare", params={"experiment": exp["experiment_id"], "a": "smoke", "b": "e2e"}).json()
    s = data["summary"]
    assert s["paired"] == want["paired"]
    assert s["only_a"] == want["only_a"]
    assert s["confusion"] == want["confusion"]
    assert s["verdict_agreement"] == {"agree": want["agree"], "total": want["paired"]}
    for name in ("steps", "tool_calls", "tokens", "cost_usd", "agent_cost_usd", "agent_s", "elapsed_s"):
        ta, tb, pct = want[name]
        assert s[name]["a"] == pytest.approx(ta) and s[name]["b"] == pytest.approx(tb), name
        assert s[name]["saved_pct"] == pytest.approx(pct), name
    assert s["early_stopped_a"] == want["early_a"]
    assert s["errored_a"] == want["errored_a"]
    assert s["cut_by_budget_a"] == want["cut_a"]
    assert s["ran_to_end_a"] == want["paired"] - want["early_a"] - want["errored_a"] - want["cut_a"]
    assert f"{round(want['agent_s'][2])}% less agent time" in data["headline"]


@needs_shared
def test_a_zip_of_the_results_folder_reads_the_same_runs(real, client, engine):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path in sorted(RESULTS.parent.rglob("*")):
            if path.is_file():
                zf.write(path, str(path.relative_to(RESULTS.parent.parent)))
    body = client.post("/api/traces", params={"wait": "true"}, files=[("files", ("results.zip", buf.getvalue(), "application/zip"))]).json()
    assert body["errors"] == []
    # the same run ids as the folder, read the same way: not duplicated, and nothing changed
    assert body["runs_created"] == [] and body["runs_updated"] == []
    assert body["runs_unchanged"] == sorted(real)


@needs_shared
def test_the_run_page_shows_the_buckets_the_status_and_both_times(real, client):
    run_id, want = next((rid, w) for rid, w in real.items() if w["status"] == "SUCCESS" and w["early_stop"])
    page = client.get("/runs/" + quote(run_id, safe="")).text
    assert f"{want['uncached']:,} uncached input + {want['cache_write']:,} cache write + " \
           f"{want['cache_read']:,} cache read + {want['output']:,} output" in page
    assert "coder_eval: SUCCESS" in page
    assert "end to end" in page


# -- fixture folders of this file's own --------------------------------------------------------

def task_json(task_id: str, variant: str, *, status: str, turns: list[tuple[str, list[str]]],
              usage: dict[str, Any], early_stop: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """A task.json in coder_eval's documented field names: one iteration, one assistant
    message per turn, each with the commands (`tool_use_ids`) it issued."""
    messages, commands = [], []
    for i, (text, cmds) in enumerate(turns):
        ids = [f"tool-{i}-{j}" for j in range(len(cmds))]
        messages.append({"role": "assistant", "content_blocks": [{"block_type": "text", "text": text}],
                         "tool_use_ids": ids, "input_tokens": 10, "output_tokens": 5, "cache_creation_tokens": 0,
                         "cache_read_tokens": 0})
        commands += [{"tool_name": "Bash", "tool_id": tid, "assistant_turn_index": i, "parameters": {"command": c},
                      "result_status": "success", "result_summary": "ok", "duration_ms": 3.0}
                     for tid, c in zip(ids, cmds)]
    return {"task_id": task_id, "task_description": f"do {task_id}", "variant_id": variant, "final_status": status,
            "started_at": "2026-01-02T03:04:05", "completed_at": "2026-01-02T03:04:09", "duration_seconds": 4.0,
            "weighted_score": 1.0 if status == "SUCCESS" else 0.0,
            "success_criteria_results": [{"criterion_type": "command_executed", "description": "ran ls",
                                          "score": 1.0 if status == "SUCCESS" else 0.0, "pass_threshold": 0.9,
                                          "gating": True}],
            "iterations": [{"iteration": 1, "user_input": "go", "agent_output": "", "duration_seconds": 0.5,
                            "commands": commands, "messages": messages, "crashed": False}],
            "total_token_usage": usage, "total_assistant_turns": len(turns), "early_stop": early_stop}


def test_the_older_layout_without_replicate_folders(ingest, engine, tmp_path):
    root = tmp_path / "nightly"
    for variant in ("smoke", "e2e"):
        folder = root / variant / "t1"
        folder.mkdir(parents=True)
        # a file written before the token split: input_tokens alone is the uncached input
        doc = task_json("t1", variant, status="SUCCESS", turns=[("look", ["ls"]), ("done", [])],
                        usage={"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 100,
                               "cache_creation_input_tokens": 50, "total_cost_usd": 0.01})
        (folder / "task.json").write_bytes(orjson.dumps(doc))
        # the sandbox copy is never read, however many files it has
        (folder / "artifacts" / "venv").mkdir(parents=True)
        (folder / "artifacts" / "venv" / "task.json").write_text("not json")
        (folder / "artifacts" / "log.jsonl").write_text("not a trace\n")
    report = ingest(root)
    assert report.errors == [] and report.files == 2
    assert sorted(report.created) == ["nightly/e2e/t1/00", "nightly/smoke/t1/00"]
    with Session(engine) as session:
        row = run_detail.get_run_row(session, run_id="nightly/smoke/t1/00")
    assert (row["experiment"], row["variant"], row["task_id"], row["replicate"]) == ("nightly", "smoke", "t1", 0)
    # 20 uncached + 100 read + 50 written, each once; + 10 output
    assert (row["tokens_input"], row["tokens_total"], row["tokens_cache_read"], row["tokens_cache_write"]) == (170, 180, 100, 50)
    assert (row["steps"], row["tool_calls"], row["verdict"]) == (2, 1, "pass")
    # no run.json: the cost is the agent's spend, the whole bill as far as the file says
    assert row["cost_usd"] == pytest.approx(0.01) and row["agent_cost_usd"] == pytest.approx(0.01)


def test_a_single_task_folder_and_a_single_task_json(ingest, engine, tmp_path):
    folder = tmp_path / "res" / "smoke" / "t2" / "03"
    folder.mkdir(parents=True)
    doc = task_json("t2", "smoke", status="MAX_TURNS_EXHAUSTED", turns=[("a", ["ls"]), ("b", ["ls -la"])],
                    usage={"uncached_input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0, "input_tokens": 20, "total_cost_usd": None})
    (folder / "task.json").write_bytes(orjson.dumps(doc))
    (tmp_path / "res" / "run.json").write_bytes(orjson.dumps({"run_id": "2026-01-02_03-04-05", "task_results": []}))
    report = ingest(folder / "task.json")
    assert report.errors == [] and report.created == {"2026-01-02_03-04-05/smoke/t2/03"}
    with Session(engine) as session:
        row = run_detail.get_run_row(session, run_id="2026-01-02_03-04-05/smoke/t2/03")
    assert (row["replicate"], row["verdict"], row["stop_reason"], row["source_status"]) == (3, "fail", "budget_steps",
                                                                                         "MAX_TURNS_EXHAUSTED")
    assert row["verdict_reason"] == "failed: turn budget exhausted"
    # unpriced is not free
    assert row["cost_usd"] is None and row["agent_cost_usd"] is None
    again = ingest(folder.parent)  # the task folder: the same run, nothing new
    assert again.errors == [] and again.created == set()


@pytest.mark.parametrize("status,verdict", [("SUCCESS", "pass"), ("FAILURE", "fail"), ("TIMEOUT", "fail"),
                                            ("COST_BUDGET_EXCEEDED", "fail"), ("BUILD_FAILED", "error"),
                                            ("NOT_GRADED", "not_graded")])
def test_final_status_categories(ingest, engine, tmp_path, status, verdict):
    folder = tmp_path / "r" / "v" / "t" / "00"
    folder.mkdir(parents=True)
    doc = task_json("t", "v", status=status, turns=[("a", ["ls"])],
                    usage={"uncached_input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0})
    (folder / "task.json").write_bytes(orjson.dumps(doc))
    ingest(tmp_path / "r")
    with Session(engine) as session:
        row = run_detail.get_run_row(session, run_id="r/v/t/00")
    assert (row["verdict"], row["source_status"]) == (verdict, status)


def test_paths_that_hold_nothing_are_named(ingest, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("hello")
    other = tmp_path / "config.json"
    other.write_text('{\n  "a": 1\n}\n')
    summary = tmp_path / "run.json"
    summary.write_text('{"run_id": "x"}')
    report = ingest(empty, tmp_path / "notes", other, summary)
    messages = {(e.file, e.message) for e in report.errors}
    assert messages == {
        (str(empty), f"no traces found in {empty}: expected JSONL files, QitOS run folders or coder_eval results"),
        (str(tmp_path / "notes"),
         f"no traces found in {tmp_path / 'notes'}: expected JSONL files, QitOS run folders or coder_eval results"),
        (str(other), "not a trace: a JSON document, not JSON Lines (one record per line); "
                     "expected JSONL files, QitOS run folders or coder_eval results"),
        (str(summary), "coder_eval's run.json summarizes a results folder and holds no run itself: "
                       "ingest the folder that holds it (or a zip of it)"),
    }
    assert report.empty == [str(empty), str(tmp_path / "notes"), str(other), str(summary)]


def test_the_cli_exits_2_on_a_path_with_nothing_to_read(tmp_path):
    from click.testing import CliRunner

    from qita_board.cli import main

    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["ingest", str(empty), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert f"no traces found in {empty}: expected JSONL files, QitOS run folders or coder_eval results" in result.output


def test_an_upload_of_a_task_json_and_of_an_empty_zip(client):
    doc = task_json("solo", "smoke", status="SUCCESS", turns=[("a", ["ls"])],
                    usage={"uncached_input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0})
    body = client.post("/api/traces", params={"wait": "true"}, files=[("files", ("task.json", orjson.dumps(doc), "application/json"))]).json()
    assert body["errors"] == [] and body["runs_created"] == ["2026-01-02T03:04:05/smoke/solo/00"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("results/readme.txt", "nothing here")
    body = client.post("/api/traces", params={"wait": "true"}, files=[("files", ("empty.zip", buf.getvalue(), "application/zip"))]).json()
    assert body["rejected"] == ["empty.zip: no traces found in empty.zip: expected JSONL files, QitOS run folders "
                                "or coder_eval results"]


def smoke_e2e_results(root: Path, run_id: str = "ce-run-1") -> Path:
    """root/run_id: run.json and a smoke/e2e pair of one task (for other modules' tests).
    The smoke run stops early on a pass; the e2e run fails."""
    folder = root / run_id
    usage = {"uncached_input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0, "total_cost_usd": 0.1}
    smoke = task_json("activate", "smoke", status="SUCCESS", turns=[("look", ["ls"])], usage=usage,
                      early_stop={"reason": "criterion_passed", "deciding_criterion_type": "command_executed",
                                  "deciding_criterion_description": "ran ls",
                                  "armed_criteria": ["command_executed: ran ls"], "sdk_turn_index": 1,
                                  "tool_call_index": 1, "elapsed_seconds": 0.5, "turns_remaining_at_stop": 4,
                                  "gate_threshold": 1.0})
    e2e = task_json("activate", "e2e", status="FAILURE", turns=[("look", ["ls"]), ("more", ["ls -la"])], usage=usage)
    for variant, doc in (("smoke", smoke), ("e2e", e2e)):
        target = folder / variant / "activate" / "00"
        target.mkdir(parents=True, exist_ok=True)
        (target / "task.json").write_bytes(orjson.dumps(doc))
    (folder / "run.json").write_bytes(orjson.dumps({"run_id": run_id, "task_results": []}))
    return folder


# -- what real coder_eval runs also write: turn-less iterations, rows without task.json, execute nights

def test_an_iteration_without_an_assistant_turn_is_no_step(ingest, client, tmp_path):
    # A dialog's last iteration holds only the simulated user's closing message; an
    # `agent: none` run has one iteration and no turn. coder_eval counts no assistant turn
    # in either (total_assistant_turns), so neither is a step; the user message is kept.
    folder = tmp_path / "dlg" / "default"
    doc = task_json("d1", "default", status="SUCCESS", turns=[("hi", ["ls"]), ("done", [])],
                    usage={"uncached_input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0})
    doc["iterations"].append({"iteration": 2, "user_input": "thanks, that is all [STOP]", "agent_output": "",
                              "commands": [], "messages": [{"role": "user", "content_blocks": []}],
                              "assistant_turn_count": 0, "token_usage": None, "duration_seconds": 0.0, "crashed": False})
    none = task_json("d2", "default", status="SUCCESS", turns=[], usage={})
    none["iterations"][0].update(messages=[], commands=[], assistant_turn_count=0, token_usage=None)
    none["total_token_usage"], none["total_assistant_turns"] = None, 0
    for doc_ in (doc, none):
        (folder / doc_["task_id"] / "00").mkdir(parents=True)
        (folder / doc_["task_id"] / "00" / "task.json").write_bytes(orjson.dumps(doc_))
    assert ingest(tmp_path / "dlg").errors == []
    d1 = _api_run(client, "dlg/default/d1/00")
    assert d1["run"]["steps"] == doc["total_assistant_turns"] == 2
    events = client.get("/api/runs/" + quote("dlg/default/d1/00", safe="") + "/steps/2/events").json()["data"]
    closing = [e for e in events if e["phase"] == "ITERATION_WITHOUT_TURNS"]
    assert [e["record"]["payload"]["user_input"] for e in closing] == ["thanks, that is all [STOP]"]
    d2 = _api_run(client, "dlg/default/d2/00")
    assert (d2["run"]["steps"], d2["run"]["tokens_total"], d2["run"]["verdict"]) == (0, None, "pass")


def test_an_attempt_billed_before_any_assistant_message_is_no_step(ingest, client, tmp_path):
    # The first attempt crashed after the model was billed but before it surfaced an
    # assistant message (only a reconciliation message): coder_eval counts no turn in it
    # (assistant_turn_count 0), so total_assistant_turns is the retry's turns alone.
    folder = tmp_path / "crash" / "default"
    billed = {"uncached_input_tokens": 1000, "output_tokens": 0, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 0}
    doc = task_json("c1", "default", status="SUCCESS", turns=[("a", ["ls"]), ("b", ["pwd"]), ("c", [])],
                    usage={"uncached_input_tokens": 1030, "output_tokens": 15, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0})
    doc["iterations"][0]["iteration"] = 2
    doc["iterations"].insert(0, {"iteration": 1, "user_input": "go", "agent_output": "", "commands": [],
                                 "messages": [{"role": "reconciliation", "content_blocks": []}],
                                 "assistant_turn_count": 0, "token_usage": billed, "duration_seconds": 1.0,
                                 "crashed": True, "crash_reason": "sandbox lost"})
    (folder / "c1" / "00").mkdir(parents=True)
    (folder / "c1" / "00" / "task.json").write_bytes(orjson.dumps(doc))
    report = ingest(tmp_path / "crash")
    assert report.errors == [] and not [w for w in report.warnings if "assistant turn" in w.message]
    run = _api_run(client, "crash/default/c1/00")["run"]
    assert run["steps"] == doc["total_assistant_turns"] == 3
    assert run["tokens_total"] == 1030 + 15  # the run's own total: the billed attempt is in it
    events = _api_run(client, "crash/default/c1/00")["run_events"]  # it came before any step: run-level
    crash = [e for e in events if e["phase"] == "ITERATION_WITHOUT_TURNS"]
    assert len(crash) == 1 and crash[0]["ok"] is False
    assert crash[0]["record"]["payload"]["token_usage"] == billed


def _row(task_id: str, status: str, **extra: Any) -> dict[str, Any]:
    """A run.json task_results row, in coder_eval's flat names (its `input_tokens` is the uncached input)."""
    return {"task_id": task_id, "replicate_index": 0, "variant_id": "default", "status": status,
            "weighted_score": extra.pop("weighted_score", None), "duration": 0.0, "iteration_count": 0,
            "tags": ["infra"], "model_used": None, "input_tokens": None, "output_tokens": None,
            "cache_creation_input_tokens": None, "cache_read_input_tokens": None, "total_tokens": None,
            "total_cost_usd": None, "agent_cost_usd": None, "total_turns": 0, "error_message": None, **extra}


def test_a_run_json_row_without_a_task_json_is_a_run_as_coder_eval_counts_it(ingest, client, tmp_path):
    # coder_eval counts a task that failed before it wrote task.json (its sandbox never
    # started) in tasks_run and tasks_error; the board counts it too.
    root = tmp_path / "2026-03-04_05-06-07"
    ok = task_json("x2", "default", status="SUCCESS", turns=[("a", ["ls"])],
                   usage={"uncached_input_tokens": 140, "output_tokens": 140, "cache_read_input_tokens": 0,
                          "cache_creation_input_tokens": 0})
    (root / "default" / "x2" / "00").mkdir(parents=True)
    (root / "default" / "x2" / "00" / "task.json").write_bytes(orjson.dumps(ok))
    (root / "default" / "x1" / "00").mkdir(parents=True)  # coder_eval made the folder, then failed
    rows = [_row("x2", "SUCCESS", weighted_score=1.0, total_cost_usd=0.0025, agent_cost_usd=0.0025),
            _row("x1", "ERROR", error_message="docker daemon is not responding", cost_complete=False,
                 agent_config={"type": "scripted"})]
    run = {"run_id": root.name, "tasks_run": 2, "tasks_succeeded": 1, "tasks_failed": 0, "tasks_error": 1,
           "pass_rate": 0.5, "task_results": rows}
    (root / "run.json").write_bytes(orjson.dumps(run))
    report = ingest(root)
    assert report.errors == [] and sorted(report.created) == [f"{root.name}/default/x1/00", f"{root.name}/default/x2/00"]
    x1 = _api_run(client, f"{root.name}/default/x1/00")["run"]
    assert (x1["verdict"], x1["source_status"], x1["steps"], x1["tokens_total"], x1["cost_usd"]) == ("error", "ERROR", 0, None, None)
    assert x1["verdict_reason"] == "error: no gradeable attempt (docker daemon is not responding)"
    # the row names its agent, and its cost flag holds for the agent's slice too (REPORT_SCHEMA:
    # "every cost figure" is a floor), as for a task.json with a row
    assert x1["agent"] == "scripted"
    assert (x1["meta"]["cost_complete"], x1["meta"]["agent_cost_complete"]) == (False, False)
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["runs"], stats["passed"], stats["errored"], stats["pass_rate"]) == (
        run["tasks_run"], run["tasks_succeeded"], run["tasks_error"], run["pass_rate"])
    # read again, or after coder_eval wrote the missing task.json (a resumed run): one run each
    again = ingest(root)
    assert again.errors == [] and again.created == set()
    late = task_json("x1", "default", status="FAILURE", turns=[("a", ["ls"])], usage={"uncached_input_tokens": 1,
                     "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
    (root / "default" / "x1" / "00" / "task.json").write_bytes(orjson.dumps(late))
    resumed = ingest(root)
    assert resumed.errors == [] and resumed.created == set() and resumed.warnings == []
    x1 = _api_run(client, f"{root.name}/default/x1/00")
    # the task.json's whole record took the row's place: its objective and criteria too
    assert (x1["run"]["source_status"], x1["run"]["objective"]) == ("FAILURE", "do x1")
    assert [c["id"] for c in x1["criteria"]] == ["command_executed: ran ls"] and x1["criteria"][0]["declared"]


def test_an_execute_night_that_measured_nothing_has_no_pass_rate(ingest, client, tmp_path):
    # `coder-eval execute` grades nothing: NOT_GRADED rows, and the crashes and budget
    # breaches it still reports carry no weighted_score. coder_eval's pass_rate is null then
    # (not 0%: nothing was measured), and the board says "not measured".
    root = tmp_path / "night"
    statuses = {"e1": "NOT_GRADED", "e2": "ERROR", "e3": "TOKEN_BUDGET_EXCEEDED", "e4": "TIMEOUT"}
    for task_id, status in statuses.items():
        doc = task_json(task_id, "default", status=status, turns=[("a", ["ls"])],
                        usage={"uncached_input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 0,
                               "cache_creation_input_tokens": 0})
        doc["weighted_score"], doc["success_criteria_results"] = None, []
        (root / "default" / task_id / "00").mkdir(parents=True)
        (root / "default" / task_id / "00" / "task.json").write_bytes(orjson.dumps(doc))
    assert ingest(root).errors == []
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["graded"], stats["measured"], stats["pass_rate"]) == (3, 0, None)
    variant = client.get("/api/experiments").json()["experiments"][0]["variants"][0]
    assert (variant["decided"], variant["pass_rate"], variant["interval"]) == (3, None, None)
    # by task too (variant.json's pass_rate is per task, under the same rule): not 0 of 3
    # by REPORT_SCHEMA.md's FinalStatus table: TOKEN_BUDGET_EXCEEDED and TIMEOUT are failed,
    # ERROR is error (variant.json's tasks_failed and tasks_error)
    assert (variant["tasks_failed"], variant["tasks_error"], variant["task_pass_rate"]) == (2, 1, None)
    from tests.app.parsed_html import one, page, text
    assert text(one(page(client.get("/").text), ".not-measured")) == "— not measured: none of its 3 graded runs was scored"
    # one scored run is a measurement: 0 of 4 graded then is a 0% pass rate
    scored = root / "default" / "e5" / "00"
    scored.mkdir(parents=True)
    (scored / "task.json").write_bytes(orjson.dumps(task_json("e5", "default", status="FAILURE", turns=[("a", [])],
                                                              usage={})))
    assert ingest(root).errors == []
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["graded"], stats["measured"], stats["pass_rate"]) == (4, 1, 0.0)
    variant = client.get("/api/experiments").json()["experiments"][0]["variants"][0]
    assert (variant["pass_rate"], variant["tasks_failed"], variant["tasks_error"], variant["task_pass_rate"]) == (
        0.0, 3, 1, 0.0)


def task_jsons(root: Path, variant: str, statuses: dict[str, str]) -> None:
    """task.jsons of one variant; a status in lower case is an execute night's unscored row."""
    for task_id, status in statuses.items():
        doc = task_json(task_id, variant, status=status.upper(), turns=[("a", ["ls"])], usage={})
        if status.islower() or status == "NOT_GRADED":
            doc["weighted_score"], doc["success_criteria_results"] = None, []
        (root / variant / task_id / "00").mkdir(parents=True)
        (root / variant / task_id / "00" / "task.json").write_bytes(orjson.dumps(doc))


def test_a_side_that_measured_nothing_has_no_verdicts_to_compare(ingest, client, tmp_path):
    # Both variants were run by `coder-eval execute`: the crash and the time-out are the
    # only rows with a status, and neither carries a score. Their "agreement" (two misses)
    # is no measurement: coder_eval gives neither variant a pass rate.
    root = tmp_path / "execute-night"
    task_jsons(root, "smoke", {"t1": "NOT_GRADED", "t2": "error", "t3": "timeout"})
    task_jsons(root, "e2e", {"t1": "NOT_GRADED", "t2": "error", "t3": "timeout"})
    assert ingest(root).errors == []
    (exp,) = client.get("/api/experiments").json()["experiments"]
    params = {"experiment": exp["experiment"], "a": "smoke", "b": "e2e"}
    data = client.get("/api/compare", params=params).json()
    s = data["summary"]
    assert (s["paired"], s["not_graded"], s["verdict_agreement"], s["unmeasured"]) == (
        3, 3, {"agree": 0, "total": 0}, {"a": True, "b": True})
    assert s["agreement"]["rate"] is None and s["confusion"] == {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0,
                                                                 "fail_fail": 0}
    assert data["headline"].startswith("Verdicts identical on 0 of 0 paired runs (0 tasks), 3 not graded left out "
                                       "(smoke and e2e measured no verdict: run without grading)")
    from tests.app.parsed_html import one, page, text
    html = page(client.get("/compare", params=params).text)
    assert text(one(html, ".unmeasured")).startswith("smoke and e2e measured no verdict")
    assert html.select(".errors-note") == []  # no "fail includes error" beside a matrix of nothing
    assert "Fail includes error" not in client.get("/api/compare", params={**params, "format": "md"}).text
    # e2e graded for real (its crash then is a miss, as in coder_eval's pass rate): smoke still measured nothing
    root2 = tmp_path / "graded-e2e"
    task_jsons(root2, "smoke", {"t1": "NOT_GRADED", "t2": "error"})
    task_jsons(root2, "e2e", {"t1": "SUCCESS", "t2": "error"})
    assert ingest(root2).errors == []
    params = {"experiment": "graded-e2e", "a": "smoke", "b": "e2e"}
    s = client.get("/api/compare", params=params).json()["summary"]
    assert (s["not_graded"], s["verdict_agreement"]["total"], s["unmeasured"]) == (2, 0, {"a": True, "b": False})
    # one scored smoke run makes smoke's verdicts measurements, its unscored crash a miss among them
    task_jsons(root2, "smoke", {"t3": "FAILURE"})
    task_jsons(root2, "e2e", {"t3": "FAILURE"})
    assert ingest(root2).errors == []
    s = client.get("/api/compare", params=params).json()["summary"]
    assert (s["not_graded"], s["verdict_agreement"], s["unmeasured"]) == (
        1, {"agree": 2, "total": 2}, {"a": False, "b": False})
    assert s["confusion"]["fail_fail"] == 2
    note = one(page(client.get("/compare", params=params).text), ".errors-note")
    assert text(note) == "fail includes error (no gradeable attempt, counted as a miss): 1 in smoke, 1 in e2e"


def test_a_task_id_holding_a_slash_is_one_run(ingest, client, tmp_path):
    # a dataset suite's rows: task id `suite/row`, laid out as <variant>/suite/row/<NN>/
    root = tmp_path / "suite-run"
    rows = []
    for name in ("s1/pos-a", "s1/neg-b"):
        doc = task_json(name, "default", status="SUCCESS", turns=[("a", ["ls"])], usage={})
        folder = root / "default" / name / "00"
        folder.mkdir(parents=True)
        (folder / "task.json").write_bytes(orjson.dumps(doc))
        rows.append(_row(name, "SUCCESS", weighted_score=1.0))
    (root / "run.json").write_bytes(orjson.dumps({"run_id": "suite-run", "task_results": rows}))
    report = ingest(root)
    assert report.errors == [] and sorted(report.created) == ["suite-run/default/s1/neg-b/00", "suite-run/default/s1/pos-a/00"]


def test_a_suite_row_without_run_json_is_named_by_the_folder_above_its_variant(ingest, client, tmp_path):
    # Live, before coder_eval writes run.json, the folder holding the variant folders
    # names the results; a row's id `suite/row` takes two folders, so that folder is one
    # further up than for a plain task. Without variant_id the variant is the folder
    # above the id's folders, not the suite's.
    root = tmp_path / "2026-12-05_09-00-00"
    plain = task_json("t1", "va", status="SUCCESS", turns=[("a", ["ls"])], usage={})
    row = task_json("s18-suite/rowA", "va", status="SUCCESS", turns=[("a", ["ls"])], usage={})
    bare = task_json("s18-suite/rowB", "va", status="SUCCESS", turns=[("a", ["ls"])], usage={})
    del bare["variant_id"]
    for doc in (plain, row, bare):
        folder = root / "va" / doc["task_id"] / "00"
        folder.mkdir(parents=True)
        (folder / "task.json").write_bytes(orjson.dumps(doc))
    report = ingest(root)
    assert report.errors == []
    assert sorted(report.created) == [f"{root.name}/va/s18-suite/rowA/00", f"{root.name}/va/s18-suite/rowB/00",
                                      f"{root.name}/va/t1/00"]
    runs = {r["run_id"]: r for r in client.get("/api/runs").json()["data"]}
    assert {(r["experiment"], r["variant"]) for r in runs.values()} == {(root.name, "va")}


def test_task_jsons_read_before_run_json_was_written_are_read_again_once_it_is(ingest, client, tmp_path):
    # A run watched live: coder_eval writes each task.json as its task ends, and run.json
    # and experiment.json only at the end. Their figures (the row's bill, the experiment's
    # id) win once they exist, though the task.json files themselves never change.
    root = tmp_path / "2026-12-05_08-00-00"
    usage = {"uncached_input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0, "total_cost_usd": 0.01}
    for variant in ("smoke", "e2e"):
        folder = root / variant / "t1" / "00"
        folder.mkdir(parents=True)
        doc = task_json("t1", variant, status="SUCCESS", turns=[("a", ["ls"])], usage=usage)
        (folder / "task.json").write_bytes(orjson.dumps(doc))
    assert ingest(root).errors == []
    before = {r["run_id"]: r for r in client.get("/api/runs").json()["data"]}
    assert {r["experiment"] for r in before.values()} == {root.name}
    assert {r["cost_usd"] for r in before.values()} == {0.01}
    rows = [{**_row("t1", "SUCCESS", weighted_score=1.0), "variant_id": v, "total_cost_usd": 0.03,
             "agent_cost_usd": 0.01} for v in ("smoke", "e2e")]
    rows.append({**_row("t2", "ERROR"), "variant_id": "e2e"})  # a task that never wrote task.json
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "nightly", "description": "d"}))
    again = ingest(root)
    assert again.errors == [] and again.records > 0
    after = {r["run_id"]: r for r in client.get("/api/runs").json()["data"]}
    assert sorted(after) == sorted([*before, f"{root.name}/e2e/t2/00"])  # the same runs, and the row's
    assert {r["experiment"] for r in after.values()} == {"nightly"}
    assert {after[rid]["cost_usd"] for rid in before} == {0.03}
    assert ingest(root).records == 0  # nothing changed since: nothing is read again
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "nightly-2", "description": "d"}))
    assert ingest(root).records > 0
    assert {r["experiment"] for r in client.get("/api/runs").json()["data"]} == {"nightly-2"}


def _warnings(client, run_id: str) -> list[str]:
    return list(_api_run(client, run_id)["run"]["warnings"] or [])


def _one_task(root: Path, variant: str = "smoke", task_id: str = "t1", **kw: Any) -> dict[str, Any]:
    doc = task_json(task_id, variant, status=kw.pop("status", "SUCCESS"), turns=kw.pop("turns", [("a", ["ls"])]),
                    usage={"uncached_input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0, "total_cost_usd": 0.01})
    folder = root / variant / task_id / "00"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.json").write_bytes(orjson.dumps(doc))
    return doc


def test_a_task_json_read_again_for_its_run_json_says_why_and_not_new_version(ingest, client, tmp_path):
    # The task.json never changed: what changed is the experiment run.json names, and the
    # warning on the run says so (a "new version" of a file that did not change misleads).
    root = tmp_path / "night"
    _one_task(root)
    assert ingest(root).warnings == []
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "exp-1"}))
    again = ingest(root)
    label = str(root / "smoke" / "t1" / "00" / "task.json")
    expected = (f"run 'night/smoke/t1/00' was loaded again from {label}, read again (the run.json or "
                "experiment.json of its results folder changed): it had 1 step, pass, it has 1 step, pass "
                "(changed: run_start)")
    assert [w.message for w in again.warnings] == [expected]
    assert _warnings(client, "night/smoke/t1/00") == [expected]
    assert _api_run(client, "night/smoke/t1/00")["run"]["experiment"] == "exp-1"


def test_runs_named_anew_by_run_json_take_the_place_of_the_earlier_ones(ingest, client, tmp_path):
    # Watched live, a results folder is named by its folder until run.json gives its run_id;
    # the runs then have other ids, and the earlier ones, made by the same files, go.
    root = tmp_path / "2026-12-05_08-00-00"
    for variant in ("smoke", "e2e"):
        _one_task(root, variant)
    assert ingest(root).errors == []
    old = sorted(r["run_id"] for r in client.get("/api/runs").json()["data"])
    assert old == [f"{root.name}/e2e/t1/00", f"{root.name}/smoke/t1/00"]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": "night-7", "task_results": []}))
    again = ingest(root)
    assert again.errors == []
    assert sorted(r["run_id"] for r in client.get("/api/runs").json()["data"]) == ["night-7/e2e/t1/00",
                                                                                    "night-7/smoke/t1/00"]
    label = str(root / "smoke" / "t1" / "00" / "task.json")
    said = (f"run '{root.name}/smoke/t1/00' was deleted: it came from {label}, which now makes run "
            "'night-7/smoke/t1/00' instead (the run.json or experiment.json of its results folder changed)")
    assert said in [w.message for w in again.warnings]
    assert said in _warnings(client, "night-7/smoke/t1/00")
    assert client.get("/api/runs/" + quote(f"{root.name}/smoke/t1/00", safe="")).status_code == 404
    assert ingest(root).records == 0


def test_a_new_reading_replaces_what_an_earlier_reading_made(ingest, client, tmp_path, monkeypatch):
    # A database ingested by an earlier board holds what its reading made: here one step
    # too many (as before eb0b6b6 counted a turn-less attempt). A new reading reads every
    # task.json again and leaves nothing of the earlier one: no stale step, no stale note.
    from qita_board.ingest import coder_eval

    real_records = coder_eval.task_records

    def earlier(doc, **kw):
        records = real_records(doc, **kw)
        steps = [r for r in records if r.get("type") == "step"]
        extra = {**steps[-1], "step": steps[-1]["step"] + 1}
        # and counted it (the run's count is its run_end's)
        records = [{**r, "steps": r["steps"] + 1} if r.get("type") == "run_end" else r for r in records]
        return [*records, extra]

    root = tmp_path / "night"
    doc = _one_task(root, turns=[("a", ["ls"]), ("b", ["pwd"])])
    monkeypatch.setattr(coder_eval, "task_records", earlier)
    ingest(root)
    assert _api_run(client, "night/smoke/t1/00")["run"]["steps"] == 3
    monkeypatch.setattr(coder_eval, "task_records", real_records)
    assert ingest(root).records == 0  # the same reading: nothing is read again
    monkeypatch.setattr(coder_eval, "READING", coder_eval.READING + "-next")
    again = ingest(root)
    run = _api_run(client, "night/smoke/t1/00")["run"]
    assert run["steps"] == doc["total_assistant_turns"] == 2
    steps = client.get("/api/runs/" + quote("night/smoke/t1/00", safe="") + "/steps").json()["data"]
    assert [s["step"] for s in steps] == [1, 2]
    label = str(root / "smoke" / "t1" / "00" / "task.json")
    assert [w.message for w in again.warnings] == [
        f"run 'night/smoke/t1/00' was loaded again from {label}, read again (this version of qita board reads it "
        "anew): it had 3 steps, pass, it has 2 steps, pass (changed: steps, run_end)"]


def test_a_run_json_written_after_discovery_is_read_by_the_next_pass(engine, settings, client, tmp_path):
    # A pass finds the files, then coder_eval writes experiment.json before the pass reads
    # the task.json: what the pass saved must not claim that experiment.json as read.
    from qita_board.ingest import Ingestor
    from qita_board.ingest.sources import discover

    root = tmp_path / "night"
    _one_task(root)
    (root / "run.json").write_bytes(orjson.dumps({"run_id": "night", "task_results": []}))
    found = discover([str(root)], settings=settings)
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "exp-late"}))
    Ingestor(engine, settings).ingest_discovery(found)
    Ingestor(engine, settings).ingest_paths([str(root)])
    assert _api_run(client, "night/smoke/t1/00")["run"]["experiment"] == "exp-late"


def test_two_uploads_of_results_under_the_same_names_keep_both_nights(client, tmp_path):
    # An upload is known by its names: a second night's results uploaded as the same zip
    # name are a new version of that upload, but the first night's runs (other ids) stay.
    def night(run_id: str) -> bytes:
        root = tmp_path / run_id
        _one_task(root)
        (root / "run.json").write_bytes(orjson.dumps({"run_id": run_id, "task_results": []}))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for f in sorted(root.rglob("*.json")):
                zf.write(f, f.relative_to(root).as_posix())
        return buf.getvalue()

    for run_id in ("night-1", "night-2"):
        r = client.post("/api/traces", params={"wait": "true"},
                        files=[("files", ("results.zip", night(run_id), "application/zip"))])
        assert r.status_code == 200 and r.json()["errors"] == []
    assert sorted(r["run_id"] for r in client.get("/api/runs").json()["data"]) == ["night-1/smoke/t1/00",
                                                                                    "night-2/smoke/t1/00"]


def weighted_gate_results(root: Path) -> Path:
    """root/wg: one smoke task coder_eval passed through a weighted armed gate at 0.5 with
    one of its two armed criteria (weight 1 each) failed (for other modules' tests)."""
    doc = task_json("w1", "smoke", status="SUCCESS", turns=[("run", ["pytest"])],
                    usage={"uncached_input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
                           "cache_creation_input_tokens": 0},
                    early_stop={"reason": "criterion_failed", "deciding_criterion_type": "command_executed",
                                "deciding_criterion_description": "no rm",
                                "armed_criteria": ["command_executed: ran pytest", "command_executed: no rm"],
                                "sdk_turn_index": 1, "tool_call_index": 1, "elapsed_seconds": 0.5,
                                "turns_remaining_at_stop": 3, "gate_threshold": 0.5})
    doc["weighted_score"] = 0.5
    doc["success_criteria_results"] = [
        {"criterion_type": "command_executed", "description": "ran pytest", "score": 1.0, "pass_threshold": 1.0},
        {"criterion_type": "command_executed", "description": "no rm", "score": 0.0, "pass_threshold": 1.0}]
    doc["task_config"] = {"resolved": {
        "run_limits": {"stop_early_gate_threshold": 0.5},
        "success_criteria": [
            {"type": "command_executed", "description": "ran pytest", "weight": 1.0, "stop_early": {"on_pass": "stop"}},
            {"type": "command_executed", "description": "no rm", "weight": 1.0, "stop_early": {}}]}}
    target = root / "wg" / "smoke" / "w1" / "00"
    target.mkdir(parents=True)
    (target / "task.json").write_bytes(orjson.dumps(doc))
    return root / "wg"


def test_a_weighted_gate_below_one_passes_with_an_armed_criterion_failed(ingest, client, tmp_path):
    # coder_eval's armed_criteria_passed: binarise each armed criterion, weight, compare
    # with stop_early_gate_threshold. Two armed criteria of weight 1 at threshold 0.5, one
    # failed: SUCCESS, and the criteria read alone must say the same (no "criteria alone
    # say fail" beside a pass coder_eval itself gave).
    assert ingest(weighted_gate_results(tmp_path)).errors == []
    run = _api_run(client, "wg/smoke/w1/00")["run"]
    assert (run["verdict"], run["criteria_verdict"], run["gated_on"]) == ("pass", "pass", "armed")
    page = client.get("/runs/" + quote("wg/smoke/w1/00", safe="")).text
    assert "criteria alone say" not in page
    assert "gated on armed criteria only (weighted: 50% of their weight needed)" in " ".join(page.split())
    assert _api_run(client, "wg/smoke/w1/00")["gate_threshold"] == 0.5


def test_a_result_without_its_pass_threshold_takes_the_configured_one(ingest, client, tmp_path):
    # coder_eval's gate compares each score with its criterion's configured pass_threshold
    # (all_criteria_passed); the result's field only mirrors it, and older task.json files
    # lack it. 0.6 against a configured 0.5 passes: it was read against the 0.9 default,
    # a "criteria alone say fail" beside coder_eval's SUCCESS.
    doc = task_json("th", "e2e", status="SUCCESS", turns=[("run", ["pytest"])],
                    usage={"uncached_input_tokens": 10, "output_tokens": 5})
    doc["weighted_score"] = 0.6
    doc["success_criteria_results"] = [{"criterion_type": "run_command", "description": "tests pass", "score": 0.6}]
    doc["task_config"] = {"resolved": {"success_criteria": [
        {"type": "run_command", "description": "tests pass", "pass_threshold": 0.5}]}}
    target = tmp_path / "th" / "e2e" / "th" / "00"
    target.mkdir(parents=True)
    (target / "task.json").write_bytes(orjson.dumps(doc))
    assert ingest(tmp_path / "th").errors == []
    body = _api_run(client, "th/e2e/th/00")
    assert [(c["id"], c["pass_threshold"], c["passed"]) for c in body["criteria"]] == [
        ("run_command: tests pass", 0.5, True)]
    assert (body["run"]["verdict"], body["run"]["criteria_verdict"]) == ("pass", "pass")
