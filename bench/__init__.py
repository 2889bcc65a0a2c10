"""Benchmarks of the board: synthetic traces, ingest against a raw floor, HTTP latency, QitOS side by side.

Run as modules from the worktree root (`python -m bench.ingest ...`); see docs/performance.md.
"""
