"""Errors that help: a missing run names the nearest ids and the experiments; compare groups
that do not exist name the valid ones; step ranges past the end say so. HTML and JSON alike."""

from __future__ import annotations

import pytest

from tests.app.pages_traces import run_records
from tests.app.parsed_html import attrs, one, page, select_texts, text
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends


@pytest.fixture
def runs(tmp_path, ingest):
    recs = []
    for rid, exp, variant in [("smoke/task-07/0", "ab", "smoke"), ("smoke/task-07/1", "ab", "smoke"),
                              ("e2e/task-07/0", "ab", "e2e"), ("smoke/task-08/0", "ab", "smoke"),
                              ("other-run", "solo", "only")]:
        recs += run_records(rid, experiment=exp, variant=variant, steps=3)
    assert ingest(write_jsonl(tmp_path / "r.jsonl", recs)).ok


def test_missing_run_names_the_id_the_nearest_ids_and_the_experiments(runs, client):
    r = client.get("/api/runs/smoke%2Ftask-07%2F2")
    body = r.json()
    assert r.status_code == 404 and body["asked"] == {"run_id": "smoke/task-07/2"}
    assert body["error"].startswith("no run with id 'smoke/task-07/2'")
    # the longest shared prefix first: smoke/task-07/ then smoke/task-0
    assert body["nearest_run_ids"][:3] == ["smoke/task-07/0", "smoke/task-07/1", "smoke/task-08/0"]
    assert body["experiments"] == ["ab", "solo"]
    # a task id where a run id belongs finds the runs of that task
    assert client.get("/api/runs/task-other-run").json()["nearest_run_ids"][0] == "other-run"
    # the page says the same, with links
    doc = page(client.get("/runs/smoke%2Ftask-07%2F2").text)
    assert text(one(doc, '.error-message[role="alert"]')).startswith("no run with id 'smoke/task-07/2'")
    nearest = one(doc, "#nearest-runs")
    assert select_texts(nearest, "a")[:3] == ["smoke/task-07/0", "smoke/task-07/1", "smoke/task-08/0"]
    assert attrs(nearest, "a", "href")[0] == "/runs/smoke%2Ftask-07%2F0"
    experiments = one(doc, "#experiments-list")
    assert [(text(a), a["href"]) for a in experiments.select("a")] == [
        ("ab", "/runs?experiment=ab"), ("solo", "/runs?experiment=solo")]
    # every route that takes a run id answers the same way
    for url in ("/api/runs/nope/steps", "/api/runs/nope/live", "/api/runs/nope/delete", "/api/pair?a=nope",
                "/api/runs/nope/calls/1"):
        r = client.get(url)
        assert r.status_code == 404 and r.json()["asked"] == {"run_id": "nope"}, url


def test_a_run_id_typed_with_its_slashes_opens_the_run_or_names_the_nearest(runs, client):
    # Pages show "smoke/task-07/0" as it is: typed into the address bar, its slashes
    # split it into path segments that no run route matched (a bare "no such page").
    r = client.get("/runs/smoke/task-07/0", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (307, "/runs/smoke%2Ftask-07%2F0")
    r = client.get("/runs/smoke/task-07/1/steps?offset=1&limit=1", follow_redirects=False)
    assert r.headers["location"] == "/runs/smoke%2Ftask-07%2F1/steps?offset=1&limit=1"
    assert client.get("/api/runs/e2e/task-07/0", follow_redirects=False).headers["location"] == \
        "/api/runs/e2e%2Ftask-07%2F0"
    assert client.get("/api/runs/e2e/task-07/0").json()["run"]["run_id"] == "e2e/task-07/0"
    missing = client.get("/api/runs/smoke/task-07/2")
    assert missing.status_code == 404 and missing.json()["asked"] == {"run_id": "smoke/task-07/2"}
    assert missing.json()["nearest_run_ids"][:2] == ["smoke/task-07/0", "smoke/task-07/1"]
    doc = page(client.get("/runs/smoke/task-07/2").text)
    assert select_texts(one(doc, "#nearest-runs"), "a")[:2] == ["smoke/task-07/0", "smoke/task-07/1"]
    # what the catch-all must not take from the real routes (found in review)
    assert client.get("/api/runs/other-run/export.jsonl", follow_redirects=False).status_code == 404  # no loop
    assert client.get("/runs/", follow_redirects=False).headers["location"] == "/runs"
    assert client.get("/api/runs/", follow_redirects=False).headers["location"] == "/api/runs"
    assert client.get("/runs/smoke/task-07/0/", follow_redirects=False).headers["location"] == "/runs/smoke/task-07/0"
    assert client.delete("/api/runs/a/b").status_code == 404
    assert client.get("/api/runs/other-run/steps/abc").json()["error"] == "no such page"


def test_nothing_close_says_so(runs, client):
    body = client.get("/api/runs/zzzzzzzzzzzzzzzzzzzz").json()
    assert body["nearest_run_ids"] == [] and body["experiments"] == ["ab", "solo"]
    doc = page(client.get("/runs/zzzzzzzzzzzzzzzzzzzz").text)
    assert select_texts(doc, ".error-box .error-help") == ["No run id is close to it.", "Experiments on this board: ab solo"]
    assert not doc.select("#nearest-runs")


def test_compare_with_a_variant_that_does_not_exist_names_the_variants(runs, client):
    r = client.get("/api/compare?experiment=ab&a=smoke&b=nosuch")
    assert r.status_code == 404
    body = r.json()
    assert body["error"] == "experiment 'ab' has no variant 'nosuch'; its variants: e2e, smoke"
    assert body["valid"] == ["e2e", "smoke"] and body["variants"] == {"ab": ["e2e", "smoke"]}
    html = client.get("/compare?experiment=ab&a=smoke&b=nosuch")
    assert html.status_code == 404
    valid = one(html.text, "#valid-variants")
    assert text(valid.b) == "ab" and select_texts(valid, "a.tag") == ["e2e", "smoke"]
    compare = one(valid, "a:not(.tag)")
    # the side asked for stays first: smoke with its partner, never e2e with smoke
    assert (compare["href"], text(compare)) == ("/compare?experiment=ab&a=smoke&b=e2e", "compare smoke with e2e")
    # neither side exists as asked: compare's own default pick, smoke with e2e
    html = client.get("/compare?experiment=ab&a=nosuch&b=other")
    assert text(one(html.text, "#valid-variants a.suggested-compare")) == "compare smoke with e2e"


def test_compare_with_an_experiment_or_tag_that_does_not_exist_names_the_valid_ones(runs, client):
    r = client.get("/api/compare?experiment=nosuch&a=smoke&b=e2e")
    assert r.status_code == 404 and r.json()["valid"] == ["ab", "solo"]
    r = client.get("/api/compare?a_experiment=ab&b_experiment=missing")
    assert r.status_code == 404 and "no experiment 'missing'" in r.json()["error"] and r.json()["valid"] == ["ab", "solo"]
    r = client.get("/api/compare?a_tag=x&b_tag=y")
    assert r.status_code == 404 and r.json()["error"].startswith("no run has tag 'x', 'y'")


def test_compare_of_a_group_with_itself_is_a_400(runs, client):
    r = client.get("/api/compare?experiment=ab&a=smoke&b=smoke")
    assert r.status_code == 400 and "choose two different variants" in r.json()["error"]
    r = client.get("/api/compare?a_experiment=ab&b_experiment=ab")
    assert r.status_code == 400


def test_a_step_past_the_end_says_so(runs, client):
    body = client.get("/api/runs/other-run?from=9999").json()
    assert body["notice"] == "there is no step 9999 or later: the last is step 2; showing the last steps"
    doc = page(client.get("/runs/other-run?from=9999").text)
    assert text(one(doc, '#steps-notice[role="status"]')) == body["notice"]
    assert attrs(doc, "#steps > article", "id")[-1] == "step-2"                # the last steps, down to the last
    r = client.get("/api/runs/other-run/steps?offset=9999")
    assert r.status_code == 404
    assert r.json()["error"] == "offset 9999 is past the end: the run has 3 steps (offsets 0 to 2)"
    assert client.get("/api/runs/other-run?from=1").json().get("notice") is None


def test_an_unknown_step_filter_names_the_valid_ones(runs, client):
    r = client.get("/api/runs/other-run?only=retries")
    assert r.status_code == 400 and r.json()["valid"] == ["critic", "decided", "errors"]


def test_a_nul_in_an_asked_run_id_is_a_404_on_either_backend(runs, client):
    # PostgreSQL refuses NUL in a query parameter: the lookup of near ids must not send one
    r = client.get("/api/runs/smoke%2Ftask-07%00x")
    assert r.status_code == 404 and r.json()["asked"] == {"run_id": "smoke/task-07\x00x"}
    assert r.json()["nearest_run_ids"][:2] == ["smoke/task-07/0", "smoke/task-07/1"]


@pytest.mark.parametrize("url", ["/runs/a%00b", "/api/runs/a%00b/live", "/api/runs/a%00b/steps", "/runs/a%00b/delete",
                                 "/api/pair?a=a%00b"])
def test_every_run_route_answers_404_for_an_id_with_nul(runs, client, url):
    assert client.get(url).status_code == 404, url


def test_a_nul_in_a_filter_is_no_internal_error(runs, settings):
    # SQLite finds nothing; PostgreSQL refuses the parameter, which the board answers as a 400
    # (through the catch-all handler: a client that does not re-raise sees what a browser sees)
    from fastapi.testclient import TestClient

    from qita_board.main import create_app

    client = TestClient(create_app(settings), base_url="http://127.0.0.1", raise_server_exceptions=False)
    for url in ("/api/compare?experiment=a%00b&a=smoke&b=e2e", "/api/runs?experiment=a%00b", "/api/runs?tag=%00"):
        r = client.get(url)
        assert r.status_code in (200, 400, 404), url
        if r.status_code == 400:
            assert "NUL character" in r.json()["error"], url
        elif r.status_code == 200 and "count" in r.json():
            assert r.json()["count"] == 0, url
