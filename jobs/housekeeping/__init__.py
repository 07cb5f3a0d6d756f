"""``nsaudit lake``: the housekeeping a lake needs after months of nightly audits.

Compaction and Z-order (``optimize``), removal of files no version needs any more (``vacuum``),
retention of the last N days (``retention``) and each table's commit history (``history``),
through either Delta writer: delta-rs (``deltalake``, no JVM) or delta-spark (``native``), as
``[lake] writer`` says. docs/audit.md, "Housekeeping", says what each does and guarantees.
"""
