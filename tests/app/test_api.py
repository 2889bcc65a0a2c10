"""The JSON API started in the foundation: health, runs, one run, its steps; run ids of any shape."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from qita_board.urls import decode_run_id, encode_run_id
from tests.conftest import write_jsonl

from .test_ingest import EXAMPLE

pytestmark = pytest.mark.both_backends

ODD_IDS = [
    "plain",
    "with/slash/and/more",
    "..",
    ".",
    "a%2Fb",
    "what?#frag&x=1",
    "空格 and spaces",
    "emoji 🧪 run",
    "~~looks-encoded",
    "<script>alert(1)</script>",
    "back\\slash",
    "x" * 200,
    "steps",
    "ends/steps",
]


def test_health(client):
    assert client.get("/api/health").json() == {"status": "ok"}


def test_runs_list_and_filters(client, ingest, tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "a1", "experiment": "e", "variant": "smoke", "tags": ["x"]},
        {"type": "run_end", "run_id": "a1", "status": "completed", "stop_reason": "early_stop"},
        {"type": "run_start", "run_id": "b1", "experiment": "e", "variant": "e2e", "tags": ["y"]},
        {"type": "run_end", "run_id": "b1", "status": "completed", "stop_reason": "budget_steps"},
        {"type": "run_start", "run_id": "c1", "experiment": "other"},
    ])
    ingest(tmp_path / "t.jsonl")
    body = client.get("/api/runs").json()
    assert body["count"] == 3 and {r["run_id"] for r in body["data"]} == {"a1", "b1", "c1"}
    assert [r["run_id"] for r in client.get("/api/runs", params={"variant": "smoke"}).json()["data"]] == ["a1"]
    assert [r["run_id"] for r in client.get("/api/runs", params={"tag": "y"}).json()["data"]] == ["b1"]
    assert [r["run_id"] for r in client.get("/api/runs", params={"stop_reason": "budget_steps"}).json()["data"]] == ["b1"]
    assert client.get("/api/runs", params={"experiment": "e"}).json()["count"] == 2
    assert client.get("/api/runs", params={"q": "c1"}).json()["count"] == 1
    paged = client.get("/api/runs", params={"sort": "run_id", "order": "asc", "limit": 1, "offset": 1}).json()
    assert [r["run_id"] for r in paged["data"]] == ["b1"] and paged["count"] == 3


def test_bad_query_parameters_are_a_clear_400(client):
    r = client.get("/api/runs", params={"state": "sideways"})
    assert (r.status_code, r.json()["error"]) == (400, "state must be one of running, abandoned, finished")
    r = client.get("/api/runs", params={"limit": 0})
    assert r.status_code == 400


def test_run_detail_has_criteria_and_early_stop(client, ingest):
    ingest(EXAMPLE)
    rid = "smoke/activate-skill/0"
    body = client.get(f"/api/runs/{quote(rid, safe='')}").json()
    assert body["run"]["run_id"] == rid and body["run"]["verdict"] == "pass"
    by_id = {c["id"]: c for c in body["criteria"]}
    assert by_id["skill-used"]["armed"] and not by_id["skill-used"]["advisory"]
    assert by_id["tests-pass"]["advisory"] and by_id["tests-pass"]["passed"] is False
    assert by_id["style"]["informational"]
    assert body["early_stop"]["deciding_criterion"] == "skill-used" and body["early_stop"]["tool_call_index"] == 2
    steps = client.get(f"/api/runs/{quote(rid, safe='')}/steps", params={"offset": 1, "limit": 5}).json()
    assert steps["count"] == 2 and [s["step"] for s in steps["data"]] == [1]
    assert [(c["critic"], c["action"]) for c in steps["data"][0]["critic_outputs"]] == [("returncode", "continue"), ("grounding", "continue")]


def test_qitos_runs_through_the_api_with_every_critic_output(client, ingest, qitos_runs):
    ingest(qitos_runs)
    assert client.get("/api/runs").json()["count"] == 4
    steps = client.get("/api/runs/qitos_coding_20260222_043631_176007/steps").json()
    assert [len(s["critic_outputs"]) for s in steps["data"]] == [1, 1, 1]
    assert {c["reason"] for s in steps["data"] for c in s["critic_outputs"]} == {"react_reflection_pass"}


@pytest.mark.parametrize("run_id", ODD_IDS)
def test_any_unicode_run_id_round_trips_through_the_api(client, ingest, tmp_path, run_id):
    write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": run_id, "objective": "odd id"},
        {"type": "step", "run_id": run_id, "step": 0, "critic_outputs": [{"critic": "c", "action": "stop"}]},
        {"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": "critic_stop"},
    ])
    ingest(tmp_path / "t.jsonl")
    assert decode_run_id(encode_run_id(run_id)) == run_id
    for segment in {encode_run_id(run_id), quote(run_id, safe="")} - {".", ".."}:
        body = client.get(f"/api/runs/{segment}").json()
        assert body["run"]["run_id"] == run_id, segment
        steps = client.get(f"/api/runs/{segment}/steps").json()
        assert steps["data"][0]["critic_outputs"][0]["action"] == "stop"
    page = client.get(f"/runs/{encode_run_id(run_id)}")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text


def test_unknown_run_is_404_in_json_and_html(client):
    r = client.get("/api/runs/nope")
    assert (r.status_code, r.json()) == (404, {"error": "no run with id 'nope'", "status": 404, "asked": {"run_id": "nope"},
                                              "nearest_run_ids": [], "experiments": []})
    r = client.get("/runs/nope")
    assert r.status_code == 404 and "no run with id &#39;nope&#39;" in r.text


def test_openapi_documents_the_api(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert {"/api/health", "/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/steps"} <= set(paths)


def test_values_nested_past_orjsons_limit_are_served_and_shown(client, ingest, tmp_path):
    deep: dict = {}
    node = deep
    for _ in range(600):
        node["n"] = {}
        node = node["n"]
    node["leaf"] = "bottom"
    import json  # orjson itself stops at ~254 levels when writing

    write_jsonl(tmp_path / "deep.jsonl", [{"type": "run_start", "run_id": "deep"},
                                          json.dumps({"type": "step", "run_id": "deep", "step": 0, "observation": deep}).encode()])
    assert ingest(tmp_path / "deep.jsonl").ok
    body = client.get("/api/runs/deep/steps")
    assert body.status_code == 200
    obs = body.json()["data"][0]["record"]["observation"]
    for _ in range(600):
        obs = obs["n"]
    assert obs == {"leaf": "bottom"}
    page = client.get("/runs/deep")
    assert page.status_code == 200


@pytest.mark.parametrize("segment", ["~~!!!", "~~a b", "~~YWJj", "~~%2F"])
def test_a_segment_that_is_not_our_encoding_is_a_literal_id(segment):
    # `~~YWJj` is base64 of "abc", which would travel as `abc`: not our encoding either.
    from urllib.parse import unquote

    assert decode_run_id(segment) == unquote(segment)


def test_an_unknown_tilde_id_is_named_as_asked(client):
    answer = client.get("/api/runs/~~!!!")
    assert answer.status_code == 404
    assert (answer.json()["error"], answer.json()["asked"]) == ("no run with id '~~!!!'", {"run_id": "~~!!!"})
