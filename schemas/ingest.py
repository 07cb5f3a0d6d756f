"""Ingest's own lake table, ``ingest_files``, plus how ingest partitions its tables and names the
reasons it quarantines a line for.

``ingest_files`` has one row per segment file read for a day, so the reader's promise (docs/event-log.md,
"What readers owe the writer") is checkable by anyone: for every row,
``accepted + quarantined == lines_read``.

``quarantine.reason`` is a code from :data:`QUARANTINE_REASONS`, alone or followed by ``": "`` and
a detail naming the key, value or earlier line concerned, e.g. ``wrong_type: seq`` or
``duplicate_seq_conflict: ns-a/2026-11-21/events-00000000000000000001.jsonl:17``. The code is
everything before the first ``:``.
"""

from pyspark.sql.types import BooleanType, DateType, LongType, StringType, StructField, StructType

INGEST_FILES_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),  # the day folder the file is in (UTC)
        StructField("ns", StringType(), False),  # the name-server folder the file is in
        StructField("file", StringType(), False),  # <ns>/<date>/<segment name>, relative to --events
        StructField("bytes", LongType(), False),  # size on disk (compressed size for .gz)
        StructField("compressed", BooleanType(), False),  # a .jsonl.gz segment
        StructField("open_segment", BooleanType(), False),  # a .jsonl.open segment (written to, or crashed)
        StructField("lines_read", LongType(), False),  # every line, a cut-short last one included
        StructField("accepted", LongType(), False),  # valid events, duplicates of earlier lines included
        StructField("quarantined", LongType(), False),  # rows this file put in quarantine
        StructField("duplicates", LongType(), False),  # accepted lines equal to an earlier line's event
        StructField("first_seq", LongType(), True),  # lowest seq accepted from the file; null if none
        StructField("last_seq", LongType(), True),  # highest seq accepted from the file
    ]
)

EVENTS_PARTITION_BY = ("date", "ns")
QUARANTINE_PARTITION_BY = ("date",)
INGEST_FILES_PARTITION_BY = ("date",)

# Reason codes, in the order a line is checked. The first that applies is the line's reason.
TRUNCATED_LINE = "truncated_line"  # the file's last line has no "\n": cut short by a crash
CORRUPT_GZIP = "corrupt_gzip"  # the rest of a .gz that would not decompress (raw: what came out)
INVALID_UTF8 = "invalid_utf8"  # not UTF-8; raw shows the bad bytes as \xNN
# longer than schemas.validation.MAX_LINE_BYTES (detail: its bytes and the maximum); not parsed
LINE_TOO_LONG = "line_too_long"
EMPTY_LINE = "empty_line"  # nothing but whitespace
NOT_JSON = "not_json"  # not one JSON value, or something after the object
NOT_OBJECT = "not_object"  # JSON, but not an object
# A key's value has the wrong JSON type, or is null where it may not be (detail: the key, e.g.
# ``broker_addr``, ``topics[].perm``, ``filter_servers[] (null)``). Checked key by key in line
# order together with UNKNOWN_KEY (schemas.validation.EVENT_RULE).
WRONG_TYPE = "wrong_type"
UNKNOWN_KEY = "unknown_key"  # a key v1 does not define, at the top or in a nested object (detail: the key)
MISSING_KEY = "missing_key"  # a required key is absent or null (detail: the key, and the type needing it)
BAD_VERSION = "bad_version"  # v is not 1
UNKNOWN_TYPE = "unknown_type"  # type is not a v1 event type
OUT_OF_RANGE = "out_of_range"  # seq below 1, or a time (ts, last_update_ts) no timestamp can hold
NS_MISMATCH = "ns_mismatch"  # ns differs from the name-server folder the file is in
DUPLICATE_SEQ_CONFLICT = "duplicate_seq_conflict"  # same (ns, seq) as an earlier line, other content

QUARANTINE_REASONS = (
    TRUNCATED_LINE,
    CORRUPT_GZIP,
    INVALID_UTF8,
    LINE_TOO_LONG,
    EMPTY_LINE,
    NOT_JSON,
    NOT_OBJECT,
    WRONG_TYPE,
    UNKNOWN_KEY,
    MISSING_KEY,
    BAD_VERSION,
    UNKNOWN_TYPE,
    OUT_OF_RANGE,
    NS_MISMATCH,
    DUPLICATE_SEQ_CONFLICT,
)
