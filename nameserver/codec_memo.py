"""Decoded JSON headers recalled when a client sends the same one again (remoting protocol §4).

Re-exported by :mod:`nameserver.codec`; import from there.
"""

from __future__ import annotations

import re

import orjson

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# ``"opaque":``, an int as JSON writes it (no leading zero, at most 10 digits), the member's end
_OPAQUE_MEMBER = re.compile(rb'"opaque":(-?(?:0|[1-9][0-9]{0,9}))[,}]')


class HeaderMemo:
    """JSON headers decoded before, keyed by their bytes without the digits of ``opaque``.

    A client asks the same thing over and over (every client polls every topic's route every
    30 s) with headers that differ only in ``opaque``, so a ``FrameDecoder`` given a memo
    decodes such a header once and afterwards only reads the new opaque's digits. A header is
    kept only when that is exact, which the bytes prove: no backslash (no escaped key can hide
    another ``opaque``), ``"opaque"`` exactly once, and the decoded header has a top-level
    ``opaque`` equal to that member's digits (so the member is that one). A header equal to it
    but for those digits then has the same fields but the opaque. Bounded: emptied when full
    (the headers are cheap to decode again). Not thread-safe: one per event loop.

    Args:
        max_entries: headers kept at most.
        max_header_bytes: longer headers are not kept.
    """

    __slots__ = ("_fields", "_max_entries", "_max_header_bytes")

    def __init__(self, max_entries: int = 4096, max_header_bytes: int = 1024) -> None:
        self._fields: dict[bytes, tuple] = {}
        self._max_entries = max_entries
        self._max_header_bytes = max_header_bytes

    def __len__(self) -> int:
        return len(self._fields)

    def recall(self, buf: bytearray, start: int, end: int) -> tuple | None:
        """The fields of the JSON header ``buf[start:end]`` if a header like it was kept, else None."""
        match = _OPAQUE_MEMBER.search(buf, start, end)
        if match is None:
            return None
        digits_start, digits_end = match.span(1)
        fields = self._fields.get(bytes(buf[start:digits_start] + buf[digits_end:end]))
        if fields is None:
            return None
        opaque = int(buf[digits_start:digits_end])
        if not _INT32_MIN <= opaque <= _INT32_MAX:
            return None  # the full decoder refuses it
        code, language, version, flag, remark, ext = fields
        return code, language, version, opaque, flag, remark, dict(ext) if ext is not None else None

    @staticmethod
    def _has_opaque(raw: bytes) -> bool:
        try:
            return "opaque" in orjson.loads(raw)
        except orjson.JSONDecodeError:
            return False  # decoded the lenient way: not kept

    def keep(self, buf: bytearray, start: int, end: int, fields: tuple) -> None:
        """Remember ``fields``, just decoded from the JSON header ``buf[start:end]``, if exact (above)."""
        if end - start > self._max_header_bytes:
            return
        match = _OPAQUE_MEMBER.search(buf, start, end)
        if (match is None or buf.find(b"\\", start, end) >= 0 or buf.count(b'"opaque"', start, end) != 1
                or int(match.group(1)) != fields[3]):
            return
        if fields[3] == 0 and not self._has_opaque(bytes(buf[start:end])):
            return  # 0 is also what an absent opaque reads as: these digits may be a nested member's
        digits_start, digits_end = match.span(1)
        if len(self._fields) >= self._max_entries:
            self._fields.clear()
        code, language, version, _, flag, remark, ext = fields
        self._fields[bytes(buf[start:digits_start] + buf[digits_end:end])] = (
            code, language, version, flag, remark, dict(ext) if ext is not None else None)
