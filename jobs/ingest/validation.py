"""The JVM's form of :data:`schemas.validation.EVENT_RULE`: the first key of a line, in line order,
whose value has the wrong JSON kind or that v1 does not define.

Spark's JSON reader reads any value into a string column as its text (``12345`` becomes
``"12345"``) and ignores keys the schema lacks, so a parse with ``EVENT_SCHEMA`` alone cannot see
these problems. Here the line is parsed once more, into its top-level keys with their JSON values
as variants, whose kind is exact, and the rule tree is checked over them.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from schemas import validation
from schemas.ingest import UNKNOWN_KEY, WRONG_TYPE
from schemas.validation import EVENT_RULE, JSON_ARRAY, JSON_BOOLEAN, JSON_INTEGER, JSON_OBJECT, JSON_STRING, ValueRule

# Spark's JSON reader is lenient by default; a line must be strict JSON to count as an event.
# Jackson refuses a string value over 20 million characters by default; a line of the maximum
# length may hold one.
JSON_OPTIONS = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false", "maxStringLen": str(2**31 - 1)}
_VALUES = T.MapType(T.StringType(), T.VariantType())
_OBJECT = "map<string,variant>"
_ARRAY = "array<variant>"
# what schema_of_variant calls each scalar kind; every JSON integer is read as a BIGINT when it
# fits one (a bigger one is a DECIMAL or DOUBLE: not an integer any key can hold)
_SCALAR_NAMES = {JSON_STRING: "STRING", JSON_BOOLEAN: "BOOLEAN", JSON_INTEGER: "BIGINT"}


def line_bytes(text: Column) -> Column:
    """Bytes of a line (``text`` as read) without its ``"\\n"``."""
    return F.octet_length(text) - F.when(text.endswith("\n"), 1).otherwise(0)


def within_max_length(text: Column) -> Column:
    """Whether a line is at most :data:`schemas.validation.MAX_LINE_BYTES` long; only such lines
    are parsed."""
    return line_bytes(text) <= F.lit(validation.MAX_LINE_BYTES)


def parse_values(text: Column) -> Column:
    """The line's top-level keys with their values as variants, in line order (a repeated key
    appears twice); null when the line is not one strict JSON object."""
    # a map schema is accepted too; pyspark's hint names struct and array schemas only
    return F.from_json(text, _VALUES, JSON_OPTIONS)  # type: ignore[arg-type]


def key_reason(values: Column, text: Column) -> Column:
    """``wrong_type: KEY`` or ``unknown_key: KEY`` for the first key of ``values``
    (:func:`parse_values` of ``text``) that breaks :data:`EVENT_RULE`, null when none does.

    A variant holds at most 128 MiB, so ``values`` is null for a longer line; of such a line only
    the top-level keys are checked here (the kinds of its non-string values are checked by the
    parse with ``EVENT_SCHEMA``).

    Example:
        ``{"v":1,...,"broker_addr":12345}`` gives ``wrong_type: broker_addr``;
        ``{...,"topics":[{...,"extra":1}]}`` gives ``unknown_key: topics[].extra``;
        ``{...,"topics":null}`` gives ``wrong_type: topics (null)``.
    """
    known = F.array(*[F.lit(name) for name, _ in EVENT_RULE.keys])
    unknown = F.get(F.array_except(F.json_object_keys(text), known), 0)
    return F.coalesce(
        _object_reason(values, EVENT_RULE), F.when(values.isNull(), F.concat(F.lit(f"{UNKNOWN_KEY}: "), unknown))
    )


def _object_reason(values: Column, rule: ValueRule) -> Column:
    """The first entry of a ``map<string,variant>`` that breaks ``rule``'s keys, or null."""
    prefix = f"{rule.path}." if rule.path else ""

    def entry_reason(entry: Column) -> Column:
        by_key: Column | None = None
        for name, key_rule in rule.keys:
            reason = _value_reason(entry["value"], key_rule)
            by_key = (
                F.when(entry["key"] == name, reason) if by_key is None else by_key.when(entry["key"] == name, reason)
            )
        assert by_key is not None, f"{rule.path}: an object rule without keys"
        return by_key.otherwise(F.concat(F.lit(f"{UNKNOWN_KEY}: {prefix}"), entry["key"]))

    reasons = F.filter(F.transform(F.map_entries(values), entry_reason), lambda r: r.isNotNull())
    return F.get(reasons, 0)


def _value_reason(value: Column, rule: ValueRule) -> Column:
    """Why a variant breaks ``rule``, or null: a null where none may be, the wrong kind, or (for
    an object or an array) the first thing inside that breaks its rules."""
    null_reason = F.lit(f"{WRONG_TYPE}: {rule.path} (null)") if rule.null_is_wrong_type else F.lit(None)
    wrong = F.lit(f"{WRONG_TYPE}: {rule.path}")
    if rule.kind == JSON_OBJECT:
        as_map = F.try_variant_get(value, "$", _OBJECT)
        inner = _object_reason(as_map, rule)
        kind_ok = as_map.isNotNull()
    elif rule.kind == JSON_ARRAY:
        as_array = F.try_variant_get(value, "$", _ARRAY)
        element = rule.element
        assert element is not None, f"{rule.path}: an array rule without an element rule"
        reasons = F.filter(F.transform(as_array, lambda x: _value_reason(x, element)), lambda r: r.isNotNull())
        inner = F.get(reasons, 0)
        kind_ok = as_array.isNotNull()
    else:
        inner = F.lit(None)
        kind_ok = F.schema_of_variant(value) == _SCALAR_NAMES[rule.kind]
        if rule.bounds is not None:
            low, high = rule.bounds
            kind_ok = kind_ok & F.try_variant_get(value, "$", "bigint").between(low, high)
    return F.when(F.is_variant_null(value), null_reason).when(~kind_ok, wrong).otherwise(inner.cast("string"))
