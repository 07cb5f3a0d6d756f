"""Tests of the batch side: Spark session, Delta I/O and the audit jobs."""
