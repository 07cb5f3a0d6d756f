"""Tests of the dataset schemas in ``schemas/``."""
