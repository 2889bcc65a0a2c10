"""The runs list's search (app.search): what a run is found by, and never by a masked secret."""

from __future__ import annotations

import string

import pytest

from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends

KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
PASSWORD = "s3cretPassw0rdValue"


def found(client, q: str) -> set[str]:
    return {r["run_id"] for r in client.get("/api/runs", params={"q": q, "limit": 500}).json()["data"]}


@pytest.fixture
def runs(tmp_path, ingest):
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "leaky", "objective": f"deploy with {KEY} and DB_PASSWORD=hunter2hunter2"},
        {"type": "step", "run_id": "leaky", "step": 0,
         "critic_outputs": [{"critic": "c", "action": "continue", "reason": f"found aws_secret_access_key = {SECRET}"}],
         "action_results": [{"error": f"login failed for postgresql://admin:{PASSWORD}@db/prod"}]},
        {"type": "run_end", "run_id": "leaky", "status": "completed", "stop_reason": "final",
         "final_result": "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
        {"type": "run_start", "run_id": "walker", "objective": "fix the bug"},
        {"type": "step", "run_id": "walker", "step": 0,
         "actions": [{"name": "run_pytest_suite", "args": {}}],
         "action_results": [{"error": "ModuleNotFoundError: no module named zebra"}],
         "critic_outputs": [{"critic": "verifier", "action": "retry", "reason": "pytest returncode was 1"}]},
        {"type": "step", "run_id": "walker", "step": 1,
         "tool_invocations": [{"tool_name": "open_browser_tab", "status": "ok"}]},
        {"type": "run_end", "run_id": "walker", "status": "completed", "stop_reason": "final", "ts": "2026-05-05T05:05:05Z",
         "error_message": "sandbox quota exhausted"},
        {"type": "run_start", "run_id": "described", "experiment": "exp-blue", "variant": "smoke", "model": "model-kappa",
         "metadata": {"experiment_description": "early stopping flavour", "password": "plainwordsecret"}},
    ])
    assert ingest(path).ok


def test_critic_reasons_tool_names_and_error_texts_are_searchable(runs, client):
    assert found(client, "returncode") == {"walker"}
    assert found(client, "RETURNCODE WAS") == {"walker"}  # case-insensitive
    assert found(client, "run_pytest") == {"walker"}
    assert found(client, "open_browser_tab") == {"walker"}  # a QitOS-style invocation's name
    assert found(client, "zebra") == {"walker"}  # an action result's error
    assert found(client, "fix the") == {"walker"}
    assert found(client, "deploy") == {"leaky"}
    assert found(client, "quota exhausted") == {"walker"}  # the end record's error message
    assert found(client, "stopping flav") == {"described"}  # metadata: coder_eval's experiment description
    assert found(client, "exp-blue") == found(client, "model-kap") == {"described"}
    assert found(client, "plainword") == set()  # a value under a secret key, masked by where it lives


def test_the_end_records_framing_finds_no_run(runs, client):
    # every finished run's end record holds "type": "run_end": it found them all
    assert found(client, "run_end") == found(client, "05:05:05") == set()
    assert found(client, "walk") == {"walker"}  # its id, from the run's own fields


def test_no_query_reads_a_masked_secret(runs, client):
    # The page shows the objective masked; no prefix of the key, nor of the password or
    # token, finds the run, so search cannot recover them character by character.
    for secret in (KEY, "hunter2hunter2", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", SECRET, PASSWORD):
        for n in (3, 4, 8, len(secret)):
            assert found(client, secret[:n]) == set(), secret[:n]
        # the next character after a known prefix is never told apart either
        assert all(found(client, secret[:4] + c) == set() for c in string.ascii_uppercase + string.digits)
    # the mask itself is what the page shows, so it may be found
    assert found(client, "secret masked") == {"leaky", "described"}
    assert found(client, "login failed for") == {"leaky"}  # the error text around it is found


def test_a_secret_behind_a_word_or_at_the_search_cut_is_no_oracle(tmp_path, ingest, client):
    # a tool error "bash: GITHUB_TOKEN=…" (the word before it once hid the assignment from the
    # masker), and a URL password whose "@" falls just past the 4,096 characters search keeps
    cut = '{"pad":"' + "a" * 4050 + '","db":"postgresql://app:Qz7LEAKcut92@db.internal/prod"}'
    assert cut.index("@") >= 4095
    path = write_jsonl(tmp_path / "o.jsonl", [
        {"type": "run_start", "run_id": "behind"},
        {"type": "step", "run_id": "behind", "step": 0,
         "tool_invocations": [{"tool_name": "bash", "status": "error", "error": "GITHUB_TOKEN=Qz7LEAKinv93abc rejected"}]},
        {"type": "run_end", "run_id": "behind", "status": "completed", "final_result": cut},
    ])
    assert ingest(path).ok
    assert found(client, "rejected") == {"behind"}
    for secret in ("Qz7LEAKinv93abc", "Qz7LEAKcut92"):
        for n in (3, 5, 8, len(secret)):
            assert found(client, secret[:n]) == set(), secret[:n]


def test_a_deleted_run_is_no_longer_found(runs, client):
    assert client.delete("/api/runs/walker").status_code in (200, 204)
    assert found(client, "returncode") == set()


@pytest.mark.parametrize("q", ["\x00", "a\x00", "\x00\x00\x00x"])
def test_a_nul_in_q_matches_nothing(runs, client, q):
    # SQLite's LIKE ends its pattern at a NUL: "%\x00%" matched every run.
    assert client.get("/api/runs").json()["count"] > 0
    assert client.get("/api/runs", params={"q": q}).json()["count"] == 0
    page = client.get("/runs", params={"q": q})
    assert page.status_code == 200 and "no runs match" in page.text.lower()


@pytest.mark.parametrize("data", [
    {"password": "plainwordsecret", "note": "DB_PASSWORD=hunter2hunter2 in prose", "n": 3},
    {"api_key": "short", "Authorization": "Bearer abcdefghijklmnopqrstuvwxyz", "nested": {"token": "deep-secret-value"}},
    {"error_message": f"failed with {KEY}", "tokens": {"input": 1, "output": 2}, "list": ["password=x" * 3]},
    {"secret": "", "big": "x" * 70_000 + " sk-ant-" + "a" * 40, "desc": "nothing to hide here"},
    {"auth": "Basic dXNlcjpwYXNzd29yZA==", "private_key": {"k": "v"}, "pin": "1234", "plain": "hello world"},
])
def test_run_data_texts_are_masked_as_the_whole_value_masks_them(data):
    """Search masks a run's metadata and end record string by string where each lives: the
    same texts as masking the whole value and taking its top-level strings."""
    from qita_board import search_texts
    from qita_board.secrets import mask_data

    expected = [search_texts.searchable(v) for v in mask_data(data).values() if isinstance(v, str)]
    expected = [t for t in expected if t]
    row = {name: None for name in search_texts.RUN_FIELDS} | {"meta": data, "end_record": None}
    assert search_texts.run_texts(row) == expected
    assert not any(s in "\n".join(expected) for s in ("plainwordsecret", "hunter2hunter2", "abcdefghijklmnopqrstuvwxyz",
                                                       KEY, "dXNlcjpwYXNzd29yZA==", "a" * 40))


def _search_rows(engine, run_id: str) -> list[str]:
    from sqlalchemy import text

    with engine.connect() as conn:
        return [t for (t,) in conn.execute(text("SELECT s.text FROM run_search s JOIN runs r ON r.id = s.run_pk "
                                                "WHERE r.run_id = :rid ORDER BY s.id"), {"rid": run_id})]


def test_a_run_read_in_one_transaction_is_one_search_row_and_found_by_both_halves(tmp_path, engine, settings, client):
    """A run created by the transaction gets its fields and critic texts as one row (the
    trigram index pays per distinct trigram of a row); one read over several transactions
    gets its fields' own row later, once. Either way search finds it by both."""
    from qita_board.ingest import Ingestor

    def run(rid: str) -> list[dict]:
        return [{"type": "run_start", "run_id": rid, "task_id": f"task-{rid}", "objective": "reticulate splines"},
                *({"type": "step", "run_id": rid, "step": s,
                   "critic_outputs": [{"critic": "c", "action": "continue", "reason": f"frobnicated widget {s}"}]}
                  for s in range(4)),
                {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final"}]

    Ingestor(engine, settings).ingest_paths([str(write_jsonl(tmp_path / "one.jsonl", run("whole")))])
    Ingestor(engine, settings.model_copy(update={"batch_lines": 2, "reader_process_bytes": 0})).ingest_paths(
        [str(write_jsonl(tmp_path / "many.jsonl", run("pieces")))])
    whole = _search_rows(engine, "whole")
    assert len(whole) == 1 and "task-whole" in whole[0] and "frobnicated widget 3" in whole[0]
    pieces = _search_rows(engine, "pieces")
    # the first transaction's row holds both; later ones add the critic texts, and the fields
    # again only as they change (the run_end's), each distinct text once
    assert len(pieces) > 1 and len(set(pieces)) == len(pieces)
    assert sum("task-pieces" in t and "frobnicated" in t for t in pieces) == 1
    for q in ("reticulate", "frobnicated widget 3", "task-"):
        assert {"whole", "pieces"} <= found(client, q), q


def _index_holds_exactly_the_search_rows(engine) -> None:
    """FTS5's own check of an external-content index against its table: a row missing from
    the index, or indexed twice, fails it ("database disk image is malformed")."""
    if engine.dialect.name != "sqlite":
        return  # PostgreSQL searches with ILIKE alone
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO run_search_fts (run_search_fts, rank) VALUES ('integrity-check', 1)")


def test_the_trigram_index_holds_each_search_row_once_whatever_wrote_it(tmp_path, engine, settings, client):
    """Search rows reach the trigram index in one statement per batch (migration 0018), not
    by a trigger: batches read here and in a reader process, a file read on as it grows,
    read again unchanged, rewritten, and a run deleted leave the index equal to its table,
    and every batch's texts are found."""
    from qita_board.ingest import Ingestor

    def run(rid: str, steps: range) -> list[dict]:
        return [{"type": "step", "run_id": rid, "step": s,
                 "critic_outputs": [{"critic": "c", "action": "continue", "reason": f"quokka-{rid}-{s} grazes"}]}
                for s in steps]

    path = tmp_path / "t.jsonl"
    lines = [{"type": "run_start", "run_id": "a", "objective": "wombat survey"}, *run("a", range(5)),
             {"type": "run_start", "run_id": "b"}, *run("b", range(5))]
    write_jsonl(path, lines)
    for process_bytes in (0, 1):  # read here, then (a second file) in a reader process
        small = settings.model_copy(update={"batch_lines": 3, "reader_process_bytes": process_bytes})
        source = path if process_bytes == 0 else write_jsonl(tmp_path / "c.jsonl", [
            {"type": "run_start", "run_id": "c"}, *run("c", range(7))])
        assert Ingestor(engine, small).ingest_paths([str(source)]).ok
        _index_holds_exactly_the_search_rows(engine)
    small = settings.model_copy(update={"batch_lines": 3, "reader_process_bytes": 0})
    with open(path, "ab") as fh:  # the file grows: read on from its offset
        fh.write(b"".join(__import__("orjson").dumps(r) + b"\n" for r in run("a", range(5, 9))))
    assert Ingestor(engine, small).ingest_paths([str(path)]).ok
    assert Ingestor(engine, small).ingest_paths([str(path)]).ok  # unchanged: nothing new
    _index_holds_exactly_the_search_rows(engine)
    assert found(client, "quokka-a-8") == {"a"} and found(client, "quokka-c-6") == {"c"}
    assert found(client, "wombat") == {"a"} and found(client, "quokka-b-4") == {"b"}
    # rewritten: the source's runs are read again from its first line, their old texts removed
    write_jsonl(path, [{"type": "run_start", "run_id": "a", "objective": "numbat census"}, *run("a", range(2))])
    report = Ingestor(engine, small).ingest_paths([str(path)])
    assert report.ok, report.to_json()
    _index_holds_exactly_the_search_rows(engine)
    assert found(client, "numbat") == {"a"}
    assert client.delete("/api/runs/c").status_code in (200, 204)
    _index_holds_exactly_the_search_rows(engine)
    assert found(client, "quokka-c") == set() and found(client, "quokka-a-1") == {"a"}
