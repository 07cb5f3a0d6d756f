"""The vocabulary the event's keys are defined in (:mod:`schemas.events`): scalar kinds, objects
(:class:`Struct`), arrays (:class:`Array`) and keys (:class:`Key`), each with its Spark type and
its JSON Schema bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

# Scalar kinds. JSON has one integer type; the width says which Spark type holds it and bounds
# the JSON Schema, so a value valid for one form is valid for the other.
STRING = "string"
INT32 = "int32"
INT64 = "int64"
BOOLEAN = "boolean"

_INT_BOUNDS = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}
_SPARK_SCALARS = {STRING: T.StringType(), INT32: T.IntegerType(), INT64: T.LongType(), BOOLEAN: T.BooleanType()}


@dataclass(frozen=True)
class Struct:
    """A JSON object with a fixed set of keys (a Spark struct)."""

    keys: tuple[Key, ...]


@dataclass(frozen=True)
class Array:
    """A JSON array whose elements are never null (a Spark array, ``containsNull=False``)."""

    element: FieldType


FieldType = str | Struct | Array


@dataclass(frozen=True)
class Key:
    """One key of the event or of a nested object.

    Attributes:
        name: the JSON key and the Spark column name.
        type: a scalar kind, :class:`Struct` or :class:`Array`.
        doc: its meaning, with units; becomes the JSON Schema ``description``.
        required: every object has the key (top level: every event, whatever its type).
        nullable: the value may be JSON null where the key is present.
        json_extra: further JSON Schema constraints (``const``, ``enum``, ``pattern``, ...).
    """

    name: str
    type: FieldType
    doc: str
    required: bool = False
    nullable: bool = True
    json_extra: tuple[tuple[str, Any], ...] = ()
