"""Spark job tests.

Session 1 (2026-11-22) could not run these files to completion: the machine ran eight engineers'
Spark sessions at once (load average ~20 on 2 cores) and a single Spark test file took over ten
minutes. They are committed as written but NOT collected until a session has seen each one pass;
the issue notes list them. Remove a file from this list only after running it green.
"""

collect_ignore = [
    "test_rebuild_equality.py",
]
