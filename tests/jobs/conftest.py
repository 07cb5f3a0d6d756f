"""Spark job tests: they share the session-scoped ``spark`` fixture of ``tests/conftest.py``."""
