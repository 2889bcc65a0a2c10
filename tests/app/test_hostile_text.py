"""Issue 15 item 3: 1 MB near-misses of every kind of detector in a run's objective, metadata and
a step: every page answers (the bound here is generous, the figures are in bench/hostile.py)
and /api/health keeps answering meanwhile."""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

import httpx
import pytest

from bench.hostile import near_misses
from tests.conftest import write_jsonl

#: One of each shape (the whole set is timed by `python -m bench.hostile`).
PICKED = {"password + spaces", "(token: ') repeated", "(Cookie: ') repeated", "(--password + space) repeated",
          "'eyJa-' repeated", "'-----BEGIN PRIVATE KEY-----' repeated", "BEGIN headers with bodies, no END",
          "'Authorization: Basic ' repeated", "'a://b:' repeated", "'sk-' repeated", "long name then password",
          "cookie header then a long line"}
PAGE_BOUND_S = 15.0  # generous: a loaded 2-core machine; measured well under 1 s (docs/security.md)
HEALTH_BOUND_S = 3.0


def test_hostile_text_cannot_freeze_the_board(ingest, tmp_path, settings):
    from tests.browser.conftest import LiveServer

    records = []
    picked = [(name, text) for name, text in near_misses() if name in PICKED]
    assert len(picked) == len(PICKED)
    for i, (name, text) in enumerate(picked):
        rid = f"hostile-{i}"
        records += [{"type": "run_start", "run_id": rid, "objective": text, "metadata": {"note": text}},
                    {"type": "step", "run_id": rid, "step": 0, "observation": text, "decision": {"rationale": text}},
                    {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final",
                     "final_result": text}]
    ingest(write_jsonl(tmp_path / "hostile.jsonl", records))

    worst_health = [0.0]
    stop = threading.Event()

    def poll_health() -> None:
        with httpx.Client(base_url=live_server.url, timeout=30) as c:
            while not stop.is_set():
                t = time.monotonic()
                assert c.get("/api/health").status_code == 200
                worst_health[0] = max(worst_health[0], time.monotonic() - t)
                time.sleep(0.02)

    live_server = LiveServer(settings).start()
    poller = threading.Thread(target=poll_health, daemon=True)
    poller.start()
    timings = []
    try:
        with httpx.Client(base_url=live_server.url, timeout=120) as c:
            urls = ["/", "/api/runs", "/runs?q=password"]
            for i in range(len(picked)):
                urls += [f"/runs/hostile-{i}", f"/api/runs/hostile-{i}/steps", f"/runs/hostile-{i}/steps",
                         f"/api/runs/hostile-{i}/field?path=/run/meta/note"]
            for url in urls:
                t = time.monotonic()
                r = c.get(url)
                timings.append((time.monotonic() - t, url))
                assert r.status_code == 200, (url, r.status_code)
    finally:
        stop.set()
        poller.join(30)
        live_server.stop()
    slowest = max(timings)
    assert slowest[0] < PAGE_BOUND_S, slowest
    assert worst_health[0] < HEALTH_BOUND_S, worst_health


# -- direction controls ---------------------------------------------------------------------------

RLO, LRE, PDF, RLI, PDI = "\u202e", "\u202a", "\u202c", "\u2067", "\u2069"


@pytest.mark.parametrize(("value", "shown"), [
    ("plain", "plain"),
    ("smoke" + RLO, "smoke" + RLO + PDF),                       # an override left open is closed
    (RLO + "ssap" + PDF, RLO + "ssap" + PDF),                   # a closed one is left as it is
    (RLI + LRE + "x", RLI + LRE + "x" + PDF + PDI),             # innermost first
    (RLI + LRE + "x" + PDI, RLI + LRE + "x" + PDI),             # a PDI closes what its isolate opened
    ("x" + PDI + PDF + RLO, "x" + PDI + PDF + RLO + PDF),       # stray closers close nothing outside
])
def test_direction_controls_a_value_opens_are_closed_at_its_end(value, shown):
    from qita_board.words import contain_bidi

    assert contain_bidi(value) == shown


def test_a_variant_that_opens_an_override_cannot_reverse_the_compare_pages_words(ingest, client, tmp_path):
    # "smoke‮" beside " pass" in one text node read "smokessap" in a browser
    recs = []
    for variant, verdict in (("smoke" + RLO, "pass"), ("e2e", "fail")):
        recs += [{"type": "run_start", "run_id": f"{variant}-1", "experiment": "bidi", "variant": variant,
                  "task_id": "t"},
                 {"type": "run_end", "run_id": f"{variant}-1", "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "b.jsonl", recs)).ok
    html = client.get("/compare", params={"experiment": "bidi", "a": "smoke" + RLO, "b": "e2e"}).text
    assert f"smoke{RLO}{PDF} pass" in html and f"smoke{RLO} pass" not in html
    # what a page sends back is the name as written: the form's value, a list's option
    assert f'value="smoke{RLO}"' in html
    assert html.count(RLO) == html.count(RLO + PDF) + html.count(f'value="smoke{RLO}"')
    runs = client.get("/runs", params={"experiment": "bidi"}).text
    assert f'<option value="smoke{RLO}" >smoke{RLO}{PDF}</option>' in runs
    assert client.get("/api/runs", params={"variant": "smoke" + RLO}).json()["count"] == 1
    run = client.get("/runs/" + quote(f"smoke{RLO}-1", safe="")).text
    assert f'name="a" value="smoke{RLO}-1"' in run  # "compare with…" names this run exactly
