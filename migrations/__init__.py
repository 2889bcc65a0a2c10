"""Alembic migrations of the board's store (shipped as package data)."""
