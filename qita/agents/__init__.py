"""Agents shipped with qita: deterministic scripted agents for tests and demos."""
