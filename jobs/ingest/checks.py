"""Checking lines in the JVM: each line is parsed with the explicit ``EVENT_SCHEMA``
(:func:`with_event`) and given the first reason it cannot be an event, or none
(:func:`with_reason`), a reason code from ``schemas.ingest``. The kinds of values and the keys
allowed are those of ``schemas.validation.EVENT_RULE``, checked by ``jobs.ingest.validation``;
a line longer than ``schemas.validation.MAX_LINE_BYTES`` is refused unparsed.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.ingest.plan import all_nullable
from jobs.ingest.validation import JSON_OPTIONS, key_reason, line_bytes, parse_values, within_max_length
from schemas import validation
from schemas.events import EVENT_SCHEMA, EVENT_TYPES, FORMAT_VERSION, TYPE_RULES
from schemas.ingest import (
    BAD_VERSION,
    EMPTY_LINE,
    LINE_TOO_LONG,
    MISSING_KEY,
    NOT_JSON,
    NOT_OBJECT,
    NS_MISMATCH,
    OUT_OF_RANGE,
    UNKNOWN_TYPE,
    WRONG_TYPE,
)

_CORRUPT = "_corrupt"
# The line is parsed as the value of a wrapper object, so anything after the event object (a
# second object, stray text) is a syntax error of the wrapper and not silently ignored, and a
# value of the wrong type anywhere sets the wrapper's corrupt-record column.
_WRAPPED_EVENT = T.StructType([T.StructField("e", EVENT_SCHEMA), T.StructField(_CORRUPT, T.StringType())])
# Epoch milliseconds whose microseconds fit in a Spark (and Parquet) timestamp.
MAX_TIMESTAMP_MILLIS = (2**63 - 1) // 1000


def with_event(lines_df: DataFrame) -> DataFrame:
    """Add ``event`` (the line parsed with ``EVENT_SCHEMA``) and ``corrupt``.

    ``corrupt`` is true when the line is not one strict JSON value or a value has the wrong type;
    ``event`` then holds what did parse (null when the line is not an object at all). A line
    over the maximum length is not parsed (both are null).

    Example:
        ``{"v":1,"seq":"12"}`` gives ``event.v = 1``, ``event.seq = null``, ``corrupt = true``.
    """
    wrapped = F.concat(F.lit('{"e":'), F.col("text"), F.lit("}"))
    parsed = F.when(
        within_max_length(F.col("text")),
        F.from_json(wrapped, _WRAPPED_EVENT, {**JSON_OPTIONS, "columnNameOfCorruptRecord": _CORRUPT}),
    )
    return (
        lines_df.withColumn("_parsed", parsed)
        .withColumn("event", F.col("_parsed.e"))
        .withColumn("corrupt", F.col(f"_parsed.{_CORRUPT}").isNotNull())
        .drop("_parsed")
    )


def with_reason(parsed_df: DataFrame) -> DataFrame:
    """Add ``reason``: the first problem of the line (``schemas.ingest`` codes), null if accepted.

    Needs ``with_event``'s columns plus ``ns`` (the file's folder) and ``read_problem``.

    Example:
        ``{"v":1,"ns":"ns-b",...}`` in a file under ``ns-a/`` gives
        ``ns_mismatch: ns-b in a file of ns-a``.
    """
    event, text = F.col("event"), F.col("text")
    # A second parse, into each key's JSON value, is what tells a wrong kind or an unknown key
    # (jobs.ingest.validation); a line over the maximum length gets neither parse.
    keyed_df = parsed_df.withColumn("_values", F.when(within_max_length(text), parse_values(text)))
    values = F.col("_values")
    version = event["v"]
    reason = F.coalesce(
        F.col("read_problem"),
        F.when(
            ~within_max_length(text),
            F.concat(
                F.lit(f"{LINE_TOO_LONG}: "),
                line_bytes(text).cast("string"),
                F.lit(f" bytes > {validation.MAX_LINE_BYTES}"),
            ),
        ),
        F.when(
            version.isNotNull() & (version != FORMAT_VERSION),
            F.concat(F.lit(f"{BAD_VERSION}: "), version.cast("string")),
        ),
        F.when(F.col("corrupt"), _corrupt_reason(text, event, values)),
        F.when(event.isNull(), F.lit(NOT_OBJECT)),
        # The wrapper cannot see `, "key": value` after the object (the wrapper takes it as its
        # own key); a line must end with the object's brace. Checked cheaply for the usual "}\n".
        F.when(~(text.endswith("}\n") | text.rlike(r"\}\s*$")), F.lit(NOT_JSON)),
        key_reason(values, text),
        *[F.when(event[k].isNull(), F.lit(f"{MISSING_KEY}: {k}")) for k in ("v", "ns", "seq", "ts", "type")],
        F.when(~event["type"].isin(*EVENT_TYPES), F.concat(F.lit(f"{UNKNOWN_TYPE}: "), event["type"])),
        F.when(event["seq"] < 1, F.concat(F.lit(f"{OUT_OF_RANGE}: seq "), event["seq"].cast("string"), F.lit(" < 1"))),
        # the lake keeps these as microsecond timestamps; a value that overflows them is refused
        # here rather than failing the whole day's ingest
        *[
            F.when(
                ~event[k].between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS),
                F.concat(F.lit(f"{OUT_OF_RANGE}: {k} "), event[k].cast("string")),
            )
            for k in ("ts", "last_update_ts")
        ],
        F.when(
            event["ns"] != F.col("ns"),
            F.concat(F.lit(f"{NS_MISMATCH}: "), event["ns"], F.lit(" in a file of "), F.col("ns")),
        ),
        _type_rule_reason(F.col("text"), event),
        *_nested_null_reasons(event),
    )
    return keyed_df.withColumn("reason", reason).drop("_values")


def _corrupt_reason(text: Column, event: Column, values: Column) -> Column:
    """Why a corrupt line is corrupt; evaluated only for corrupt lines."""
    one_value = ~_is_corrupt_as(text, T.StringType())
    return F.coalesce(
        F.when(text.rlike(r"^\s*$"), F.lit(EMPTY_LINE)),
        F.when(event.isNull() & ~text.rlike(r"^\s*\{") & one_value, F.lit(NOT_OBJECT)),
        F.when(event.isNull() | values.isNull(), F.lit(NOT_JSON)),
        key_reason(values, text),
        F.lit(WRONG_TYPE),  # a value Spark could not convert that the variants found no fault in
    )


def _is_corrupt_as(value_text: Column, dtype: T.DataType) -> Column:
    """Whether a JSON value's text fails to parse as ``dtype`` (a string type takes any value)."""
    schema = T.StructType([T.StructField("x", dtype), T.StructField(_CORRUPT, T.StringType())])
    options = {**JSON_OPTIONS, "columnNameOfCorruptRecord": _CORRUPT}
    parsed = F.from_json(F.concat(F.lit('{"x":'), value_text, F.lit("}")), schema, options)
    return parsed[_CORRUPT].isNotNull()


def _type_rule_reason(text: Column, event: Column) -> Column:
    """``missing_key`` for a key the event's type must carry (``schemas.events.TYPE_RULES``)."""
    by_type = None
    for event_type, rule in TYPE_RULES.items():
        checks = [F.when(event[k].isNull(), _missing(k, event_type)) for k in rule.required] + [
            # "present" keys may be null; only their absence is a problem, and that is rare
            # enough to test with a pattern rather than a second parse.
            F.when(event[k].isNull() & ~text.rlike(f'"{k}"\\s*:'), _missing(k, event_type))
            for k in rule.present
        ]
        if not checks:
            continue
        check = F.coalesce(*checks) if len(checks) > 1 else checks[0]
        condition = event["type"] == event_type
        by_type = F.when(condition, check) if by_type is None else by_type.when(condition, check)
    return by_type if by_type is not None else F.lit(None).cast("string")


def _missing(key: str, event_type: str) -> Column:
    return F.lit(f"{MISSING_KEY}: {key} (required by {event_type})")


def _nested_null_reasons(event: Column) -> list[Column]:
    """Reasons for nulls where ``EVENT_SCHEMA`` forbids them below the top level.

    The lake's writer refuses such nulls, so they are quarantined here: a topic object without
    ``perm``, a ``data_version`` without ``counter``, a null inside ``filter_servers``.
    """
    return [F.when(condition(event), F.lit(message)) for condition, message in _NESTED_NULL_CHECKS]


def _nested_null_checks(dtype: T.DataType, path: str) -> list[tuple[Callable[[Column], Column], str]]:
    """``(condition on a value of dtype, reason)`` for every forbidden null under ``dtype``."""
    checks: list[tuple[Callable[[Column], Column], str]] = []
    if isinstance(dtype, T.StructType):
        for f in dtype.fields:
            name = f"{path}.{f.name}" if path else f.name
            if path and not f.nullable:  # top-level keys are checked per event type instead

                def missing(v: Column, n: str = f.name) -> Column:
                    return v.isNotNull() & v[n].isNull()

                checks.append((missing, f"{MISSING_KEY}: {name}"))
            for condition, message in _nested_null_checks(f.dataType, name):

                def in_field(v: Column, n: str = f.name, c: Callable[[Column], Column] = condition) -> Column:
                    return c(v[n])

                checks.append((in_field, message))
    elif isinstance(dtype, T.ArrayType):
        element = f"{path}[]"
        if not dtype.containsNull:
            checks.append((lambda v: F.exists(v, lambda x: x.isNull()), f"{WRONG_TYPE}: {element} (null)"))
        for condition, message in _nested_null_checks(dtype.elementType, element):

            def in_elements(v: Column, c: Callable[[Column], Column] = condition) -> Column:
                return F.exists(v, lambda x: c(x))

            checks.append((in_elements, message))
    return checks


_NESTED_NULL_CHECKS = _nested_null_checks(EVENT_SCHEMA, "")


def select_checked(reasoned_df: DataFrame) -> DataFrame:
    """What the rest of ingest needs of each line: its place, reason, and event or raw text.

    An accepted line keeps its parsed ``event`` and an ``event_hash`` (to tell a duplicate from
    a conflict); a quarantined line keeps ``raw`` (the line without its ``\\n``). The other is
    null, which halves what is held for the day.
    """
    accepted = F.col("reason").isNull()
    return reasoned_df.select(
        "date",
        "ns",
        "file",
        "line",
        "reason",
        F.when(~accepted, F.regexp_replace("text", "\n$", "")).alias("raw"),
        F.when(accepted, F.col("event")).alias("event"),
        F.when(accepted, F.xxhash64("event")).alias("event_hash"),
    )


def checked_schema(lines_schema: T.StructType) -> T.StructType:
    """The schema :func:`select_checked` gives lines of ``lines_schema`` (after :func:`with_event`
    and :func:`with_reason`), known without planning them: an empty frame of it stands for the
    checked lines when there is none to check."""
    place = [lines_schema[name] for name in ("date", "ns", "file", "line")]
    return T.StructType(
        [
            *place,
            T.StructField("reason", T.StringType(), True),
            T.StructField("raw", T.StringType(), True),
            T.StructField("event", all_nullable(EVENT_SCHEMA), True),
            T.StructField("event_hash", T.LongType(), True),
        ]
    )
