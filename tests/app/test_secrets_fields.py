"""Issue 15 item 1: field endpoints (page and API) mask a value by the keys it was stored under."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from qita_board.cli import run_ingest
from qita_board.main import create_app
from qita_board.settings import Settings
from tests.conftest import write_jsonl

TOKEN = "board-token-0123456789"
SECRETS = {"meta": "meta-pw-1", "args": "args-pw-2", "event": "evt-tok-3", "criterion": "crit-key-4"}
URLS = [
    "/api/runs/r1/field?path=/run/meta/password",
    "/runs/r1/field?path=/run/meta/password",
    "/api/runs/r1/field?path=/run/meta",
    "/api/runs/r1/field?path=/run/start_record/metadata/password",
    "/api/runs/r1/steps/0/field?path=/decision/actions/0/args/password",
    "/runs/r1/steps/0/field?path=/decision/actions/0/args/password",
    "/api/runs/r1/steps/0/field?path=/decision/actions/0/args",
    "/api/runs/r1/steps/0/field?event=0&path=/payload/token",
    "/runs/r1/steps/0/field?event=0&path=/payload/token",
    "/api/runs/r1/field?path=/criteria/c1/details/api_key",
    "/api/runs/r1/field?path=/criteria/c1/result/details/api_key",
]


def _client(tmp_path: Path, **kw) -> TestClient:
    trace = write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "r1", "ts": "2025-01-01T00:00:00Z", "metadata": {"password": SECRETS["meta"]}},
        {"type": "step", "run_id": "r1", "step": 0,
         "decision": {"actions": [{"name": "login", "args": {"user": "bob", "password": SECRETS["args"]}}]}},
        {"type": "event", "run_id": "r1", "step": 0, "phase": "ACT", "payload": {"token": SECRETS["event"]}},
        {"type": "criterion", "run_id": "r1", "id": "c1", "score": 1.0, "details": {"api_key": SECRETS["criterion"]}},
    ])
    settings = Settings(db=str(tmp_path / "q.db"), **kw)
    assert run_ingest(settings, [str(trace)], progress=False).ok
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("token", [None, TOKEN])
def test_field_endpoints_never_show_a_masked_value_without_the_right_to_see_it(tmp_path, url, token):
    with _client(tmp_path, token=token) as c:
        plain = c.get(url)
        asked = c.get(url + "&reveal=secrets") if token else None
    assert plain.status_code == 200, plain.text
    assert "[secret masked: " in plain.text
    for raw in SECRETS.values():
        assert raw not in plain.text
        if asked is not None:
            assert raw not in asked.text  # asking without the token changes nothing


@pytest.mark.parametrize("url", URLS)
def test_the_token_holder_sees_the_value_when_asking(tmp_path, url):
    with _client(tmp_path, token=TOKEN) as c:
        body = c.get(url + "&reveal=secrets", headers={"authorization": f"Bearer {TOKEN}"}).text
    assert any(raw in body for raw in SECRETS.values())
    assert "[secret masked: " not in body


def test_compare_never_groups_by_a_secret_key_nor_offers_it(tmp_path, ingest, client):
    from tests.app.pages_traces import run_records
    from tests.app.parsed_html import page
    from tests.conftest import write_jsonl

    recs = []
    for rid, variant in (("s1", "smoke"), ("e1", "e2e")):
        r = run_records(rid, experiment="secx", variant=variant)
        r[0]["task_id"] = "t1"
        r[0]["metadata"] = {"DB_PASSWORD": "LEAKdbpw22", "pin": 4711, "scenario": "retry"}
        recs += r
    assert ingest(write_jsonl(tmp_path / "g.jsonl", recs)).ok
    for key in ("DB_PASSWORD", "pin", "password"):
        r = client.get("/api/compare", params={"experiment": "secx", "a": "smoke", "b": "e2e", "group": f"meta:{key}"})
        assert r.status_code == 400 and r.json()["error"] == (
            f"metadata key {key!r} holds secrets: its values are masked, so pairs cannot be grouped by them")
        assert "LEAKdbpw22" not in r.text and "4711" not in r.text
    ok = client.get("/api/compare", params={"experiment": "secx", "a": "smoke", "b": "e2e", "group": "meta:scenario"})
    assert [g["group"] for g in ok.json()["grouped"]] == ["retry"]
    menu = [o["value"] for o in page(client.get("/compare", params={"experiment": "secx", "a": "smoke", "b": "e2e"}).text)
            .select("#group-by option")]
    assert "meta:scenario" in menu and "meta:DB_PASSWORD" not in menu and "meta:pin" not in menu


def test_a_run_whose_id_holds_a_secret_opens_by_its_masked_id(tmp_path, ingest, client):
    from urllib.parse import quote

    from qita_board.secrets import mask_text
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    rid = "deploy token=abcdef123456 run"
    assert ingest(write_jsonl(tmp_path / "i.jsonl", run_records(rid))).ok
    shown = mask_text(rid)
    assert shown != rid and "abcdef" not in shown
    listed = client.get("/api/runs").json()["data"][0]["run_id"]
    assert listed == shown                                   # the list shows (and links) the masked id
    for path in ("/runs/{}", "/api/runs/{}", "/runs/{}/export.jsonl", "/api/runs/{}/steps"):
        r = client.get(path.format(quote(shown, safe="")))
        assert r.status_code == 200, path
        assert "abcdef123456" not in r.text, path
    # a masked id no run masks to is a 404; so is one that two runs mask to (never a guess)
    assert client.get("/api/runs/" + quote(mask_text("deploy token=zzzzzzzzzzzzzzzzzzzz run"), safe="")).status_code == 404
    assert ingest(write_jsonl(tmp_path / "j.jsonl", run_records("deploy token=qwerty987654 run"))).ok
    assert mask_text("deploy token=qwerty987654 run") == shown
    assert client.get("/api/runs/" + quote(shown, safe="")).status_code == 404


EXP, VARIANT, TAG = "exp-AKIAIOSFODNN7EXAMPLE", "DB_PASSWORD=hunter2secretpw", "tag-ghp_ZZZZyyyyXXXXwwwwVVVVuuuuTTTTssss0000"
#: what must never reach a page, raw or percent-encoded
RAW = ("AKIAIOSFODNN7EXAMPLE", "hunter2secretpw", "ghp_ZZZZyyyy")


def secret_names(tmp_path, ingest) -> None:
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    recs = []
    for rid, variant in (("sn-a", VARIANT), ("sn-b", "e2e")):
        r = run_records(rid, experiment=EXP, variant=variant)
        r[0]["task_id"], r[0]["tags"] = "t1", [TAG]
        recs += r
    assert ingest(write_jsonl(tmp_path / "names.jsonl", recs)).ok


def test_names_that_hold_secrets_are_linked_and_filtered_by_their_masked_form(tmp_path, ingest, client):
    # the overview's links, the list's menus and compare's exports carried the masked name
    # (0 runs, a 404) or the raw one percent-encoded, and the chart's label the raw one
    from urllib.parse import parse_qs, urlsplit

    from qita_board.secrets import mask_text
    from tests.app.parsed_html import page

    secret_names(tmp_path, ingest)
    overview = client.get("/").text
    assert not any(raw in overview for raw in RAW)
    links = [a["href"] for a in page(overview).select("a[href]")]
    compare_link = next(h for h in links if h.startswith("/compare?"))
    assert parse_qs(urlsplit(compare_link).query) == {"experiment": [mask_text(EXP)], "a": [mask_text(VARIANT)],
                                                      "b": ["e2e"]}
    compared = client.get(compare_link)
    assert compared.status_code == 200 and not any(raw in compared.text for raw in RAW)
    doc = page(compared.text)
    assert doc.select_one("svg.bars")["aria-label"] == f"Totals per measure, {mask_text(VARIANT)} against e2e"
    exports = [a["href"] for a in doc.select("a[href]") if "format=" in a["href"] or a["href"].startswith("/api/compare")]
    assert exports
    for href in exports:
        r = client.get(href)
        assert r.status_code == 200, href
        assert not any(raw in r.text for raw in RAW), href
        assert not any(raw in r.headers.get("content-disposition", "") for raw in RAW), href   # a CSV's file name
    data = client.get(compare_link.replace("/compare?", "/api/compare?")).json()
    assert data["pairs_total"] == 1 and data["pairs"][0]["a"]["run_id"] == "sn-a"
    variant_link = next(h for h in links if h.startswith("/runs?") and "variant=" in h and "e2e" not in h)
    assert [r["run_id"] for r in client.get(variant_link.replace("/runs?", "/api/runs?")).json()["data"]] == ["sn-a"]
    listing = page(client.get("/runs").text)
    options = {o["value"] for o in listing.select("select option")}
    assert {mask_text(EXP), mask_text(VARIANT), mask_text(TAG)} <= options
    for name, value in (("experiment", mask_text(EXP)), ("tag", mask_text(TAG)), ("variant", mask_text(VARIANT))):
        assert client.get("/api/runs", params={name: value}).json()["count"] == (1 if name == "variant" else 2), name
    assert client.get("/api/runs", params={"experiment": EXP}).json()["count"] == 2          # the raw name too
    assert client.get("/api/compare", params={"a_tag": mask_text(TAG), "b_tag": mask_text(TAG)}).status_code == 400
