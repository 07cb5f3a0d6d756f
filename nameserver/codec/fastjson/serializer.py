"""The generic encoder: values to fastjson's bytes in either form, and its string and double
literals (docs/remoting-protocol.md §10.1)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

# --- strings (§10.1 rule 5, as fastjson 1.2.83 SerializeWriter.writeStringWithDoubleQuote) ---

# Default form: fastjson also escapes DEL..U+009F and U+2028/U+2029, besides the JSON minimum.
_DEFAULT_SPECIAL = re.compile('["\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
# Standard form (BrowserCompatible): '/' and everything >= U+007F as well.
_STANDARD_SPECIAL = re.compile('["\\\\/\x00-\x1f\x7f-\U0010ffff]')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code > 0xFFFF:  # Java strings are UTF-16: a supplementary character is two escapes
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _quote(text: str, standard: bool) -> str:
    special = _STANDARD_SPECIAL if standard else _DEFAULT_SPECIAL
    if special.search(text) is None:  # the common case: names and addresses are plain ASCII
        return '"' + text + '"'
    return '"' + special.sub(_escape_char, text) + '"'


# Route bodies repeat the same few names and addresses at tens of thousands of lookups a
# second: a bounded memo turns quoting into one dict lookup. Cleared wholesale when full.
_QUOTE_CACHE_MAX = 65536
_quoted_default: dict[str, str] = {}
_quoted_standard: dict[str, str] = {}


def quote(text: str, standard: bool = False) -> str:
    """One JSON string literal in the given form, e.g. ``quote("a/b", True) == '"a\\\\/b"'``."""
    cache = _quoted_standard if standard else _quoted_default
    quoted = cache.get(text)
    if quoted is None:
        quoted = _quote(text, standard)
        if len(cache) >= _QUOTE_CACHE_MAX:
            cache.clear()
        cache[text] = quoted
    return quoted


def java_double_text(value: float) -> str:
    """Java's ``Double.toString``: ``0.618``, ``5.0``, ``1.0E10``, ``1.5E-5``, ``NaN``, ``-Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:  # Java's plain-notation range; repr is plain there too
        return sign + repr(magnitude)
    digits_tuple = Decimal(repr(magnitude)).as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = digits_tuple.exponent + len(digits) - 1  # type: ignore[operator]  # finite: an int, not 'n'/'N'/'F'
    digits = digits.rstrip("0") or "0"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# --- generic encoder -------------------------------------------------------------------------


def _sorted_items(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    items = [(k, v) for k, v in mapping.items() if v is not None]  # null map values omitted
    if all(isinstance(k, int) and not isinstance(k, bool) for k, _ in items):
        return sorted(items)  # broker ids numerically (docs/nameserver-semantics.md A3)
    return sorted(items, key=lambda kv: str(kv[0]))


def _write(value: Any, out: list[str], standard: bool) -> None:
    if isinstance(value, str):
        out.append(quote(value, standard))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(java_double_text(value))
    elif value is None:
        out.append("null")  # only reachable at top level or inside a list
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(_sorted_items(value)):
            if i:
                out.append(",")
            if isinstance(key, str):
                out.append(quote(key, standard))
            elif standard:  # §10.1 rule 4: BrowserCompatible quotes non-string keys
                out.append(quote(str(key), standard))
            else:
                out.append(str(key))
            out.append(":")
            _write(item, out, standard)
        out.append("}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        out.append("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            _write(item, out, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as a fastjson body")


def dumps(value: Any, standard: bool = False) -> bytes:
    """Encode plain data (dict, list, tuple, set, str, int, float, bool, None) as UTF-8.

    Maps are written with sorted keys and without their ``None`` values; sets become sorted
    arrays. Map keys that are ints are unquoted in the default form.

    Two output forms (§10.1, §10.3):

    * **default form** (``standard=False``): non-string map keys (broker ids) unquoted,
      ``{0:"addr"}``, which is not valid JSON; non-ASCII written as raw UTF-8.
    * **standard form** (``standard=True``, fastjson ``BrowserCompatible``): every key quoted,
      ``/`` written ``\\/`` and every character >= U+007F written ``\\uXXXX`` (uppercase UTF-16
      units).

    Both forms: no whitespace, object fields in alphabetical order, null fields omitted, map keys
    sorted (strings by code point, which is UTF-8 byte order; broker ids numerically;
    docs/nameserver-semantics.md A3).
    """
    out: list[str] = []
    _write(value, out, standard)
    # A lone surrogate cannot be UTF-8; Java's encoder writes '?' for it, and so do we.
    return "".join(out).encode("utf-8", "replace")
