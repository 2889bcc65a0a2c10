"""Hostile text for the masker: about 1 MB near-misses of every detector.

Each string almost matches a detector over and over (a secret word followed by a long
run of spaces, a prefix repeated, a header without its end …): exactly the shapes that
made backtracking patterns quadratic. `tests/app/test_hostile_text.py` serves each one
through the run page and the runs list; `python -m bench.hostile` times the masker on
each and prints the slowest.
"""

from __future__ import annotations

import time
from typing import Iterator

SIZE = 1 << 20


def _rep(unit: str, size: int = SIZE) -> str:
    return unit * (size // len(unit) + 1)


def near_misses(size: int = SIZE) -> Iterator[tuple[str, str]]:
    """(name, text) pairs, each about `size` characters."""
    spaces = " " * size
    for word in ("password", "token", "secret", "api_key", "DB_PASSWORD", "Authorization", "Cookie", "bearer",
                 "Bearer", "--password", "aws_secret_access_key"):
        yield f"{word} + spaces", word + spaces
        yield f"{word} + tabs and newlines", word + ("\t\n" * (size // 2))
        yield f"({word} + space) repeated", _rep(word + " ", size)
        yield f"({word}=) repeated", _rep(word + "=", size)
        yield f"({word}: ') repeated", _rep(word + ": '", size)
    for unit in ("eyJa-", "eyJa.", "eyJaaaa.bbbb.", "sk-", "sk-ant-", "sk-proj-", "AKIA", "ASIA", "ghp_", "github_pat_",
                 "xoxb-", "AIza", "-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA ", "-----BEGIN ", "-----END ",
                 "a://", "a://b:", "http://u:p", "://", "@", "Basic ", "Authorization: Basic ", "--", "-- ", "--a ",
                 "a=", "a_", "a.", "_password", "passpass", "key", "=", ":", "'", '"', "\\", "x"):
        yield f"{unit!r} repeated", _rep(unit, size)
    yield "one long word run", "p" * size + "=x"
    yield "long name then password", "a" * size + "_password=x"
    yield "BEGIN header then a long body", "-----BEGIN RSA PRIVATE KEY-----" + "A" * size
    yield "BEGIN headers with bodies, no END", _rep("-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 8 + "\n", size)
    yield "url scheme then a long user", "http://" + "u" * size
    yield "url user then a long password", "http://u:" + "p" * size
    yield "Authorization: Basic then a long line", "Authorization: Basic " + "Zm9v" * (size // 4)
    yield "cookie header then a long line", "Set-Cookie: " + "a=b; " * (size // 5)


def main() -> None:
    from app.secrets import Masker

    times = []
    for name, text in near_misses():
        t = time.perf_counter()
        Masker().text(text)
        times.append((time.perf_counter() - t, name))
    times.sort(reverse=True)
    print(f"{len(times)} near-miss texts of {SIZE:,} characters; slowest masking:")
    for dt, name in times[:8]:
        print(f"  {dt * 1000:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
