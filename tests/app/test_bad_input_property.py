"""Property tests: ingest never raises on random or mutated lines, and never drops a valid one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import text

from qita_board.ingest.lines import check_record, parse_line

_counter = itertools.count()
# Valid trace text is UTF-8, so no lone surrogates; big integers are written by the stdlib encoder.
TEXT = st.characters(blacklist_categories=("Cs",))


def dumps(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(TEXT, max_size=40))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                            st.dictionaries(st.text(TEXT, max_size=10), kids, max_size=4)),
                          max_leaves=12)


@st.composite
def valid_step(draw, run_id: str, n: int) -> dict:
    rec = {"type": "step", "run_id": run_id, "step": n}
    if draw(st.booleans()):
        rec["observation"] = draw(json_value)
    if draw(st.booleans()):
        rec["tokens"] = {"input": draw(st.integers(0, 10**6)), "output": draw(st.integers(0, 10**6))}
    if draw(st.booleans()):
        rec["critic_outputs"] = [{"critic": draw(st.text(TEXT, max_size=20)), "action": draw(st.sampled_from(["continue", "stop", "retry", "weird"])),
                                  "reason": draw(st.text(TEXT, max_size=40))}]
    if draw(st.booleans()):
        rec["state_diff"] = {draw(st.text(TEXT, max_size=10)): {"before": draw(json_value), "after": draw(json_value)}}
    return rec


def _mutate(data: bytes, how: int, pos: int, byte: int) -> bytes:
    if not data:
        return bytes([byte])
    pos %= len(data)
    if how == 0:
        return data[:pos]  # truncated
    if how == 1:
        return data[:pos] + bytes([byte]) + data[pos + 1:]  # flipped
    if how == 2:
        return data[:pos] + bytes([byte]) + data[pos:]  # inserted
    return data[:pos] + data[pos + 1:]  # deleted


@st.composite
def trace_file(draw) -> tuple[bytes, list[tuple[str, int]]]:
    """File bytes and the (run_id, step) of every valid step line in it."""
    # NUL is the one character a run id may not hold (it is a key; see check_record).
    run_id = f"prop-{next(_counter)}-" + draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                                                      max_size=12))
    chunks: list[bytes] = []
    valid: list[tuple[str, int]] = []
    n_lines = draw(st.integers(1, 25))
    for i in range(n_lines):
        kind = draw(st.sampled_from(["valid", "valid", "mutated", "random", "json"]))
        rec = draw(valid_step(run_id, i))
        line = dumps(rec)
        if kind == "valid":
            valid.append((run_id, i))
        elif kind == "mutated":
            line = _mutate(line, draw(st.integers(0, 3)), draw(st.integers(0, 10**6)), draw(st.integers(0, 255)))
            line = line.replace(b"\n", b" ")
        elif kind == "random":
            line = draw(st.binary(max_size=200)).replace(b"\n", b" ")
        else:
            line = dumps(draw(json_value))
        chunks.append(line)
    return b"\n".join(chunks) + b"\n", valid


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=trace_file())
def test_ingest_never_raises_and_keeps_every_valid_line(tmp_path: Path, engine, settings, case):
    from qita_board.ingest import Ingestor

    data, valid = case
    path = tmp_path / f"f{next(_counter)}.jsonl"
    path.write_bytes(data)
    report = Ingestor(engine, settings).ingest_paths([str(path)])
    assert all(e.file == path.as_posix() or e.file == str(path) for e in report.errors)
    with engine.connect() as conn:
        present = set(conn.execute(text("SELECT r.run_id, s.step FROM steps s JOIN runs r ON r.id = s.run_pk")).all())
    for key in valid:
        assert key in present


@hsettings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=300))
def test_parsing_any_bytes_gives_a_record_or_a_message(raw):
    value, err = parse_line(raw)
    assert (value is None) != (err is None)
    if value is not None:
        problem = check_record(value)
        assert problem is None or isinstance(problem, str)
