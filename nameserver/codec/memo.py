"""Decoded JSON headers recalled when a client sends the same one again (docs/remoting-protocol.md
§4).

Re-exported by :mod:`nameserver.codec`; import from there.
"""

from __future__ import annotations

import re

from nameserver.codec.command_header import HeaderFields

# the header fields kept: all but the opaque
_Kept = tuple[int, int, int, int, "str | None", "dict[str, str] | None"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# ``"opaque":``, an int as JSON writes it (no leading zero, at most 10 digits), the member's end
OPAQUE_MEMBER = re.compile(rb'"opaque":(-?(?:0|[1-9][0-9]{0,9}))[,}]')
# The same first match, for ``split(header, 1)``: [before ``"opaque":``, the digits, from the member's end]
OPAQUE_SPLIT = re.compile(rb'"opaque":(-?(?:0|[1-9][0-9]{0,9}))(?=[,}])')


class HeaderMemo:
    """JSON headers decoded before, keyed by their bytes without the digits of ``opaque``.

    A client asks the same thing over and over (every client polls every topic's route every
    30 s) with headers that differ only in ``opaque``, so a ``FrameDecoder`` given a memo
    decodes such a header once and afterwards only reads the new opaque's digits. A header is
    kept only when that is exact, which the bytes prove: no backslash (no escaped key can hide
    another ``opaque``), ``"opaque"`` exactly once, and a top-level ``opaque`` in the decoded
    header (so that occurrence is it, and its digits are the opaque). A header equal to it but
    for those digits then has the same fields but the opaque.

    Bounded: emptied when full. When it was recalled fewer times than it kept headers by then
    (more distinct headers come round than it holds, e.g. a cycle through more topics), it
    stands aside for ``4 * max_entries`` headers: a header kept and never recalled costs more
    than decoding it. Not thread-safe: one per event loop.

    Args:
        max_entries: headers kept at most.
        max_header_bytes: longer headers are not kept.
    """

    __slots__ = ("_fields", "_max_entries", "_max_header_bytes", "_recalled", "_standing_aside")

    def __init__(self, max_entries: int = 16_384, max_header_bytes: int = 1024) -> None:
        self._fields: dict[bytes, _Kept] = {}
        self._max_entries = max_entries
        self._max_header_bytes = max_header_bytes
        self._recalled = 0  # since the last emptying
        self._standing_aside = 0  # headers still to let through without a look

    def __len__(self) -> int:
        return len(self._fields)

    def recall(self, buf: bytearray, start: int, end: int) -> tuple[HeaderFields | None, bytes | None]:
        """Look the JSON header ``buf[start:end]`` up.

        Returns:
            ``(fields, key)`` when a header like it was kept (its key: the header, exactly, but
            for the opaque's digits); else ``(None, key)``, the key to :meth:`keep` it under
            once decoded, or ``(None, None)`` when it cannot be kept.
        """
        if self._standing_aside:
            self._standing_aside -= 1
            return None, None
        match = OPAQUE_MEMBER.search(buf, start, end)
        if match is None:
            return None, None
        digits_start, digits_end = match.span(1)
        key = bytes(buf[start:digits_start] + buf[digits_end:end])
        fields = self._fields.get(key)
        if fields is None:
            return None, key
        opaque = int(buf[digits_start:digits_end])
        if not _INT32_MIN <= opaque <= _INT32_MAX:
            return None, None  # the full decoder refuses it
        self._recalled += 1
        code, language, version, flag, remark, ext = fields
        return (code, language, version, opaque, flag, remark, dict(ext) if ext is not None else None), key

    def keep(self, key: bytes, buf: bytearray, start: int, end: int, fields: HeaderFields) -> bool:
        """Remember ``fields``, just decoded from the JSON header ``buf[start:end]`` that has a
        top-level ``opaque`` member, under the ``key`` :meth:`recall` gave, if exact (above).

        Returns:
            True when kept: every header with this key differs from this one only in the
            opaque's digits.
        """
        if (
            end - start > self._max_header_bytes
            or buf.find(b"\\", start, end) >= 0
            or buf.count(b'"opaque"', start, end) != 1
        ):
            return False
        # The top-level member is written "opaque" (no escapes), and that is the only one: the
        # key was cut around its digits, the decoded opaque.
        if len(self._fields) >= self._max_entries:
            if self._recalled < len(self._fields):
                self._standing_aside = 4 * self._max_entries
            self._fields.clear()
            self._recalled = 0
        code, language, version, _, flag, remark, ext = fields
        self._fields[key] = (code, language, version, flag, remark, dict(ext) if ext is not None else None)
        return True
