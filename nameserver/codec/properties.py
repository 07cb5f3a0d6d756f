"""Java ``.properties`` bodies of UPDATE_NAMESRV_CONFIG (318) and GET_NAMESRV_CONFIG (319):
:func:`parse_properties` and :func:`format_properties`. Re-exported by :mod:`nameserver.codec`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_WHITESPACE = " \t\f"  # Properties' whitespace; line terminators are handled by the split
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(u)|(.))", re.DOTALL)
_CONTROL_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """Text ``Properties.load`` refuses (a malformed ``\\uXXXX``): 318 answers ``string2Properties error``."""


def _trailing_backslashes(line: str) -> int:
    return len(line) - len(line.rstrip("\\"))


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines and drop blank and comment lines (``Properties.LineReader``)."""
    natural = _NATURAL_LINES.split(text)
    logical: list[str] = []
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":  # a comment line never continues
            continue
        while _trailing_backslashes(line) % 2 == 1:
            line = line[:-1]  # an odd final backslash joins the next line (or is dropped at EOF)
            if i >= len(natural):
                break
            continuation = natural[i].lstrip(_WHITESPACE)
            i += 1
            if not continuation:  # a blank continuation ends the logical line
                break
            line += continuation
        logical.append(line)
    return logical


def _unescape_match(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return chr(int(match.group(1), 16))
    if match.group(2) is not None:
        raise PropertiesError("Malformed \\uxxxx encoding.")
    char = match.group(3)
    return _CONTROL_ESCAPES.get(char, char)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    value = _ESCAPE.sub(_unescape_match, text)
    # \uXXXX escapes are UTF-16 units: join surrogate pairs, replace unpaired ones.
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _split_key_value(line: str) -> tuple[str, str]:
    """Key up to the first unescaped ``=``, ``:`` or whitespace; then one optional separator."""
    limit = len(line)
    key_end = limit
    value_start = limit
    has_separator = False
    backslash = False
    for pos, char in enumerate(line):
        if not backslash and char in "=:":
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if not backslash and char in _WHITESPACE:
            key_end, value_start = pos, pos + 1
            break
        backslash = not backslash if char == "\\" else False
    while value_start < limit:
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return _unescape(line[:key_end]), _unescape(line[value_start:])


def parse_properties(data: bytes | str) -> dict[str, str]:
    """Parse ``.properties`` text (UTF-8 when bytes; invalid bytes become U+FFFD).

    Parsing follows ``java.util.Properties.load`` (docs/remoting-protocol.md §7 notes) but on UTF-8
    text, so non-ASCII survives where 4.9.7 would mangle it.

    Comment lines start with ``#`` or ``!``; a key ends at the first unescaped ``=``, ``:`` or
    whitespace; ``\\`` escapes (``\\t \\n \\r \\f \\uXXXX``, any other char stands for itself) and
    line continuations apply. A repeated key keeps its last value.

    Raises:
        PropertiesError: a malformed ``\\uXXXX`` escape.

    Example:
        >>> parse_properties(b"# comment\\nlistenPort = 9876\\nname:a\\\\\\n  b\\n")
        {'listenPort': '9876', 'name': 'ab'}
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    return dict(_split_key_value(line) for line in _logical_lines(text))


def _java_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def format_properties(config: Mapping[str, object]) -> bytes:
    """GET_NAMESRV_CONFIG body: ``key=value\\n`` per key, keys sorted, UTF-8; ``b""`` when empty.

    Nothing is escaped, as RocketMQ's ``MixAll.properties2String`` (one ``key=value`` line per
    entry); booleans are written the Java way (``true``/``false``), other values with ``str``;
    ``None`` values are skipped.
    """
    lines = [f"{key}={_java_text(value)}\n" for key, value in sorted(config.items()) if value is not None]
    return "".join(lines).encode("utf-8", "replace")
