"""The runs list's search through the SQLite FTS5 trigram index gives exactly the runs the
plain case-insensitive substring filter gives (Unicode, LIKE wildcards, quotes, FTS5
operators), and the index follows the searchable texts as they are added and deleted.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlmodel import Session

from qita_board import search
from qita_board.queries import cache, run_list
from qita_board.queries.run_list import RunFilters, list_runs

TEXTS = {
    "u1": ("Ünïcode ÄÖÜ straße", None),
    "u2": ("ÉCOLE école", "done"),
    "pct": ("100% done", None),
    "under": ("snake_case_name", None),
    "quote": ("it's \"quoted\"", None),
    "and": ("cats AND dogs", None),
    "near": ("NEAR(a b) here", None),
    "star": ("star* power", None),
    "emoji": ("emoji 🚀 launch", None),
    "cjk": ("日本語のテキスト", None),
    "bs": ("a\\b backslash", None),
    "mixed": ("MiXeD CaSe", "final answer 42"),
    "ops": ("( ) : ^ - + {x}", None),
    "plain": (None, "stopped: budget of 10 steps"),
}

QUERIES = ["ünï", "ÜNÏ", "Ünï", "école", "ÉCOLE", "COLE", "0% d", "% d", "e_c", "_", "%", "'s \"q", '"', '""',
           "AND", "and dogs", "NEAR", "NEAR(", "r* p", "*", "🚀 l", "本語", "\\b", "mixed case", "xyz", "ab",
           "task", "run-u", "AnSwEr 4", "budget of", ") :", "{x}", "^ -", "done"]


def ascii_fold(s: str) -> str:
    """SQLite's LIKE and lower(): only ASCII letters change case."""
    return s.translate({c: c + 32 for c in range(ord("A"), ord("Z") + 1)})


def oracle(q: str) -> set[str]:
    out = set()
    for rid, (objective, result) in TEXTS.items():
        fields = [f"run-{rid}", f"task-{rid}", objective, result]
        if any(f is not None and ascii_fold(q) in ascii_fold(f) for f in fields):
            out.add(f"run-{rid}")
    return out


def insert(conn, rid: str, objective, result) -> None:
    conn.execute(text(
        "INSERT INTO runs (run_id, task_id, replicate, source_format, state, early_stop_enabled, has_start, has_end, "
        "closed, early_stopped, steps, retries, objective, final_result, updated_at) VALUES "
        "(:r, :t, 0, 'qita', 'finished', 0, 1, 1, 1, 0, 1, 0, :o, :f, CURRENT_TIMESTAMP)"),
        {"r": f"run-{rid}", "t": f"task-{rid}", "o": objective, "f": result})
    index(conn, f"run-{rid}")


def index(conn, run_id: str) -> None:
    """What the ingest does after each batch (app.derive): add the run's searchable texts."""
    run = conn.execute(text("SELECT * FROM runs WHERE run_id = :r"), {"r": run_id}).mappings().first()
    search.index_run(conn, run["id"], run)


@pytest.fixture
def filled(engine):
    with engine.begin() as conn:
        for rid, (objective, result) in TEXTS.items():
            insert(conn, rid, objective, result)
    cache.clear()
    return engine


def found(engine, q: str) -> set[str]:
    cache.clear()
    with Session(engine) as s:
        rows, count = list_runs(s, filters=RunFilters(q=q, limit=500))
    assert count == len(rows)
    return {r["run_id"] for r in rows}


def test_the_search_index_exists_and_is_used(filled):
    with Session(filled) as s:
        assert search.has_index(s)
        sql = str(run_list._search(s, "école").compile())
    assert "run_search_fts MATCH" in sql and "lower(" in sql  # the index, then the same ILIKE re-check


@pytest.mark.parametrize("q", QUERIES)
def test_search_gives_the_substring_matches(filled, q):
    assert found(filled, q) == oracle(q)


def test_a_few_results_worked_out_by_hand(filled):
    assert found(filled, "% d") == {"run-pct"}
    assert found(filled, "_") == {"run-under"}  # `_` is a character, not a wildcard
    assert found(filled, "AND") == {"run-and"}  # task-and / run-and, and "cats AND dogs"
    assert found(filled, '"') == {"run-quote"}
    assert found(filled, "école") == {"run-u2"}
    assert found(filled, "ÉCOLE") == {"run-u2"}
    assert found(filled, "COLE") == {"run-u2"}  # ASCII letters fold: "ÉCOLE" and "école"
    # Non-ASCII letters do not fold in SQLite's LIKE: the index proposes run-u1, the re-check drops it.
    assert found(filled, "ÜNÏ") == set()
    with filled.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM run_search_fts WHERE run_search_fts MATCH '\"ÜNÏ\"'")).scalar() == 1
    assert found(filled, "done") == {"run-pct", "run-u2"}


def test_the_index_follows_new_texts_and_deleted_runs(filled):
    assert found(filled, "zebra crossing") == set()
    with filled.begin() as conn:
        insert(conn, "new", "a zebra crossing", None)
        # a changed objective is a new text of the run: both are found (texts are only added)
        conn.execute(text("UPDATE runs SET objective = 'no longer cats', updated_at = '2099-01-01' WHERE run_id = 'run-and'"))
        index(conn, "run-and")
        conn.execute(text("DELETE FROM run_search WHERE run_pk = (SELECT id FROM runs WHERE run_id = 'run-star')"))
        conn.execute(text("DELETE FROM runs WHERE run_id = 'run-star'"))
    assert found(filled, "zebra crossing") == {"run-new"}
    assert found(filled, "longer cat") == {"run-and"}
    assert found(filled, "power") == set()
    with filled.connect() as conn:
        # the index agrees with its content table (FTS5's own consistency check raises if not)
        conn.execute(text("INSERT INTO run_search_fts(run_search_fts) VALUES ('integrity-check')"))
        assert conn.execute(text("SELECT count(*) FROM run_search_fts WHERE run_search_fts MATCH :q"),
                            {"q": search.trigram_query("power")}).scalar() == 0


def test_an_unchanged_run_adds_nothing(filled):
    """The ingest indexes every run a batch touched; texts it already holds are not added again."""
    with filled.begin() as conn:
        before = conn.execute(text("SELECT count(*) FROM run_search")).scalar()
        for rid in TEXTS:
            index(conn, f"run-{rid}")
        after = conn.execute(text("SELECT count(*) FROM run_search")).scalar()
    assert after == before


def test_the_index_is_asked_for_each_trigram_and_at_most_a_bounded_number():
    # The index keeps no positions (migration 0014): a q is its trigrams, ANDed, each quoted
    # so FTS5's operators and quotes inside it are plain text.
    # side by side, every third character, and the last three: they cover q
    assert search.trigram_query("abc") == '"abc"'
    assert search.trigram_query("abcd") == '"abc" AND "bcd"'
    assert search.trigram_query("abcdef") == '"abc" AND "def"'
    assert search.trigram_query("task-00042") == '"tas" AND "k-0" AND "004" AND "042"'
    assert search.trigram_query('a"b AND') == '"a""b" AND " AN" AND "AND"'
    assert search.trigram_query("aaaaaaa") == '"aaa"'  # each trigram once
    long = search.trigram_query("".join(chr(0x4E00 + i) for i in range(200)))
    assert long.count(" AND ") == search.MAX_QUERY_TRIGRAMS - 1
    assert long.startswith(f'"{chr(0x4E00)}{chr(0x4E01)}{chr(0x4E02)}"')
    assert long.endswith(f'"{chr(0x4E00 + 197)}{chr(0x4E00 + 198)}{chr(0x4E00 + 199)}"')  # spread to the end


def test_the_index_keeps_no_positions(filled):
    with filled.connect() as conn:
        sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'run_search_fts'")).scalar()
    assert "detail=none" in sql.replace(" ", "")
