"""Incremental frame decoding (docs/remoting-protocol.md §2, §9.1); the headers themselves are
:mod:`nameserver.codec.command_header`'s.

Re-exported by :mod:`nameserver.codec`; import from there.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from nameserver.codec.command import RemotingCommand
from nameserver.codec.command_header import (
    INT32_MAX,
    INT32_MIN,
    REASON_FRAME_TOO_LARGE,
    REASON_HEADER_LENGTH_OVERRUN,
    REASON_LENGTH_TOO_SMALL,
    REASON_UNKNOWN_SERIALIZE_TYPE,
    HeaderFields,
    MalformedFrame,
    decode_json_header,
    decode_rocketmq_header,
)
from nameserver.codec.constants import MAX_FRAME_BYTES, MAX_HEADER_LENGTH, SerializeType
from nameserver.codec.memo import OPAQUE_SPLIT, HeaderMemo

_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")  # length, (serializeType << 24) | headerLength
# By value, so the decoder does not call the enum for every frame (both values are valid); the
# plain ints because an enum member costs a class attribute lookup on every use.
_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)
_JSON, _ROCKETMQ = int(SerializeType.JSON), int(SerializeType.ROCKETMQ)
_ROCKETMQ_WORD = _ROCKETMQ << 24  # a header word below it is JSON's
# What FrameDecoder.last_key gives and answer_known looks up: a header without its opaque
RequestKey = tuple[bytes, bytes] | bytes


class FrameDecoder:
    """Incremental frame decoder for one connection (§1, §2, §9.1).

    Feed bytes as they arrive; frames may be split at any byte and one read may hold several.
    Complete commands come out in order. The buffer is a ``bytearray`` read by offset: a frame's
    bytes are copied once (header and body), the buffer is compacted only when the decoder
    waits for more data. A length field outside 4..``max_frame_bytes - 4`` is refused as soon
    as its 4 bytes arrive, and the header word as soon as its 4 bytes arrive, before any body
    is awaited. After a :class:`MalformedFrame` the decoder stays failed.

    The requests a client sends again and again (route lookups) can be answered from their bytes
    (:meth:`answer_known`): one read holds many, and each then costs a key and a dict lookup
    instead of a command and its handling. A large frame can be looked at from its start
    (:meth:`frame_head`) and dropped (:meth:`skip_frame`): its rest is then discarded as it
    arrives, never buffered.

    Example:
        >>> decoder = FrameDecoder()
        >>> decoder.feed(bytes.fromhex("0000001c 01000016 0011")[:9])  # 9 bytes of G3
        >>> decoder.next_command() is None
        True
    """

    __slots__ = ("_buf", "_pos", "_max_length", "_error", "_memo", "last_key", "_skip", "_offered")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES, memo: HeaderMemo | None = None) -> None:
        """Create an empty decoder.

        Args:
            max_frame_bytes: largest whole frame, length field included (RocketMQ: 16 MiB;
                ``NameServerConfig.max_frame_bytes``).
            memo: JSON headers decoded before (may be shared by decoders on one thread); the
                commands are the same with or without.
        """
        self._buf = bytearray()
        self._pos = 0
        self._max_length = max_frame_bytes - 4
        self._error: MalformedFrame | None = None
        self._memo = memo
        # The key of the command next_command returned last, for answer_known's mapping: the
        # header without the opaque, or None (a body, or no exact key). JSON: the bytes before
        # ``"opaque":`` and from the end of its digits, a pair, when the memo proves that the
        # only opaque (no escape, one "opaque", top-level); ROCKETMQ: the serialize type and
        # header length, then the header without its 4 opaque bytes.
        self.last_key: RequestKey | None = None
        self._skip = 0  # bytes still to come of a frame dropped by skip_frame(), to be discarded
        self._offered = False  # frame_head() returned the incomplete frame at the head

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a command (a partial frame when > 0)."""
        return len(self._buf) - self._pos

    @property
    def in_frame(self) -> bool:
        """A frame has begun and not ended: bytes of it are buffered, or are still to be skipped."""
        return self._skip > 0 or len(self._buf) > self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes. Raises the earlier :class:`MalformedFrame` once failed."""
        if self._error is not None:
            raise self._error
        if self._skip:  # the rest of a skipped frame first
            if len(data) <= self._skip:
                self._skip -= len(data)
                return
            data = memoryview(data)[self._skip :]
            self._skip = 0
        self._buf += data

    def __iter__(self) -> Iterator[RemotingCommand]:
        """Yield every complete command buffered so far; raise :class:`MalformedFrame` on a bad one."""
        while (cmd := self.next_command()) is not None:
            yield cmd

    def _fail(self, reason: str, decoded: dict[str, Any], detail: str) -> MalformedFrame:
        self._error = MalformedFrame(reason, decoded, detail)
        self._buf = bytearray()  # nothing more will be read from this connection
        self._pos = 0
        return self._error

    def _wait(self) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    def next_command(self) -> RemotingCommand | None:
        """The next complete command, or ``None`` until more bytes arrive.

        Raises:
            MalformedFrame: the next frame breaks a §9.1 rule (also on every later call).
        """
        if self._error is not None:
            raise self._error
        buf, pos = self._buf, self._pos
        end = len(buf)
        available = end - pos
        if available < 8:
            if available >= 4:
                (length,) = _U32.unpack_from(buf, pos)
                if length < 4 or length > self._max_length:
                    raise self._bad_length(length)
            if pos:  # _wait(), inlined: this is the end of every read
                del buf[:pos]
                self._pos = 0
            return None
        length, word = _PREFIX.unpack_from(buf, pos)
        serialize_type, header_length = word >> 24, word & MAX_HEADER_LENGTH
        # one test for every well-formed prefix; each fault is told apart only when there is one
        if length < 4 or length > self._max_length or header_length > length - 4 or serialize_type > _ROCKETMQ:
            raise self._bad_prefix(length, serialize_type, header_length)
        frame_end = pos + 4 + length
        if end < frame_end:
            self._wait()
            return None
        header_end = pos + 8 + header_length
        fields, key = self._header(buf, pos, length, serialize_type, header_length, frame_end == header_end)
        body = None
        if frame_end > header_end:
            with memoryview(buf) as view:  # one copy (a bytearray slice would be a second)
                body = view[header_end:frame_end].tobytes()
        self.last_key = key
        self._offered = False
        if frame_end == end:  # everything consumed: reset without copying
            buf.clear()
            self._pos = 0
        else:
            self._pos = frame_end
        return RemotingCommand(*fields, body, _SERIALIZE_TYPES[serialize_type])

    def frame_head(self, min_length: int, min_body: int) -> RemotingCommand | None:
        """The incomplete frame at the head of the buffer as a command whose body holds only the
        bytes of it received so far, for a caller that may refuse the request from its start
        (then :meth:`skip_frame`); ``None`` unless the frame is at least ``min_length`` long
        (length field excluded) and its header and ``min_body`` bytes of its body are in. Each
        frame is offered once; if it is not skipped, :meth:`next_command` returns it whole.

        Call it when :meth:`next_command` returned ``None``.

        Raises:
            MalformedFrame: the frame's header is malformed (as :meth:`next_command` would).
        """
        buf, pos = self._buf, self._pos
        end = len(buf)
        if self._offered or self._error is not None or end - pos < 8:
            return None
        length, word = _PREFIX.unpack_from(buf, pos)
        header_end = pos + 8 + (word & MAX_HEADER_LENGTH)
        if length < min_length or end < header_end + min_body or end >= pos + 4 + length:
            return None
        self._offered = True
        serialize_type = word >> 24  # next_command checked the prefix
        fields, _ = self._header(buf, pos, length, serialize_type, word & MAX_HEADER_LENGTH, False)
        with memoryview(buf) as view:
            body = view[header_end:end].tobytes()
        return RemotingCommand(*fields, body, _SERIALIZE_TYPES[serialize_type])

    def skip_frame(self) -> None:
        """Drop the incomplete frame :meth:`frame_head` offered: the bytes of it buffered now, and
        the rest as they arrive, which are never buffered."""
        assert self._offered, "skip_frame() follows frame_head()"
        (length,) = _U32.unpack_from(self._buf, self._pos)
        self._skip = self._pos + 4 + length - len(self._buf)
        self._buf.clear()  # the incomplete frame was the last thing buffered
        self._pos = 0
        self._offered = False
        self.last_key = None

    def _header(
        self, buf: bytearray, pos: int, length: int, serialize_type: int, header_length: int, no_body: bool
    ) -> tuple[HeaderFields, RequestKey | None]:
        """The fields of the header of the frame at ``pos`` and its :attr:`last_key` (None for a
        frame with a body).

        Raises:
            MalformedFrame: a malformed header (and the decoder fails).
        """
        header_start = pos + 8
        header_end = header_start + header_length
        try:
            if serialize_type == _JSON:
                return self._json_header(buf, header_start, header_end, no_body)
            fields = decode_rocketmq_header(buf, header_start, header_end)
        except MalformedFrame as exc:
            decoded = {"frame_length": length, "serialize_type": serialize_type, "header_length": header_length}
            decoded.update(exc.decoded_so_far)
            raise self._fail(exc.reason, decoded, exc.detail) from None
        # every byte but the opaque's decides the fields: the key is exact (§5)
        key = bytes(buf[pos + 4 : header_start + 5]) + bytes(buf[header_start + 9 : header_end]) if no_body else None
        return fields, key

    def _json_header(
        self, buf: bytearray, header_start: int, header_end: int, no_body: bool
    ) -> tuple[HeaderFields, RequestKey | None]:
        """A JSON header's fields (recalled from the memo or decoded) and its :attr:`last_key`."""
        # The memo serves requests without a body: they are the ones sent again and again
        # (route polls, heartbeats); a registration's header names its body's CRC.
        memo = self._memo if no_body else None
        fields = key = None
        if memo is not None:
            fields, key = memo.recall(buf, header_start, header_end)
        if fields is None:
            fields, has_opaque = decode_json_header(buf[header_start:header_end])  # orjson reads a bytearray
            if key is not None and not (has_opaque and memo.keep(key, buf, header_start, header_end, fields)):  # type: ignore[union-attr]  # a key comes from the memo
                key = None
        if key is not None:
            before, _, after = OPAQUE_SPLIT.split(bytes(buf[header_start:header_end]), 1)
            return fields, (before, after)
        return fields, None

    def answer_known(
        self, answers: dict[RequestKey, tuple[Any, ...]], out: list[bytes], max_frames: int, max_bytes: int
    ) -> tuple[int, int]:
        """Answer the complete frames at the head of the buffer whose key (:attr:`last_key`) is
        in ``answers``, without decoding them; stop at the first other one (incomplete, with a
        body, malformed, unknown), which :meth:`next_command` then reads as usual.

        Args:
            answers: key -> ``ResponseFrame.splice_parts()`` of the answer to every request
                with that key, as it is now (the caller drops them when it changes). Only keys
                :attr:`last_key` gave: exact, so a frame with such a key is well-formed and
                differs from the request that key came from only in its opaque.
            out: the answers are appended here, in order, each as three pieces (their
                concatenation is the frame: the caller joins the whole batch once).
            max_frames, max_bytes: answer at most this many frames; stop once the answers
                appended reach this many bytes.

        Returns:
            ``(frames consumed, bytes appended)``.
        """
        if self._error is not None:
            return 0, 0
        pos, n, added = _scan_known(self._buf, self._pos, self._max_length, answers, out, max_frames, max_bytes)
        if n:
            self._consume(pos)
        return n, added

    def _consume(self, pos: int) -> None:
        """The buffer up to ``pos`` has been answered: reset it when that was all of it."""
        if pos == len(self._buf):
            self._buf.clear()
            pos = 0
        self._pos = pos

    def _bad_length(self, length: int) -> MalformedFrame:
        if length < 4:
            return self._fail(REASON_LENGTH_TOO_SMALL, {"frame_length": length}, f"length {length} < 4")
        return self._fail(REASON_FRAME_TOO_LARGE, {"frame_length": length}, f"length {length} > {self._max_length}")

    def _bad_prefix(self, length: int, serialize_type: int, header_length: int) -> MalformedFrame:
        if length < 4 or length > self._max_length:
            return self._bad_length(length)
        decoded = {"frame_length": length, "serialize_type": serialize_type, "header_length": header_length}
        if header_length > length - 4:
            return self._fail(REASON_HEADER_LENGTH_OVERRUN, decoded, f"header length {header_length}")
        return self._fail(REASON_UNKNOWN_SERIALIZE_TYPE, decoded, f"serialize type {serialize_type}")


def _scan_known(
    buf: bytearray,
    pos: int,
    max_length: int,
    answers: dict[RequestKey, tuple[Any, ...]],
    out: list[bytes],
    max_frames: int,
    max_bytes: int,
) -> tuple[int, int, int]:
    """answer_known's scan from ``pos``: ``(position after the frames answered, frames, bytes appended)``."""
    end = len(buf)
    split, get, unpack = OPAQUE_SPLIT.split, answers.get, _PREFIX.unpack_from
    last_prefix = end - 8  # the last position a whole prefix fits after
    n = added = 0
    # per frame, as few Python operations as will do: this loop is what a lookup costs
    while pos <= last_prefix and n < max_frames and added < max_bytes:
        length, word = unpack(buf, pos)
        frame_end = pos + 4 + length
        # complete, not too long, no body (the header is the rest of the frame)
        if frame_end > end or length > max_length or word & MAX_HEADER_LENGTH != length - 4:
            break
        header_start = pos + 8
        if word < _ROCKETMQ_WORD:  # JSON
            pieces = split(bytes(buf[header_start:frame_end]), 1)
            if len(pieces) != 3:
                break
            before, raw, after = pieces
            parts = get((before, after))
            if parts is None:
                break
            if raw == b"-0" or (len(raw) >= 10 and not INT32_MIN <= int(raw) <= INT32_MAX):
                break  # "-0" is read as 0 (written "0"); 10 digits may not fit an int32 (refused)
        elif word >> 24 == _ROCKETMQ:  # the key holds the header length: same as the known one
            parts = get(bytes(buf[pos + 4 : header_start + 5]) + bytes(buf[header_start + 9 : frame_end]))
            if parts is None:
                break
            raw = buf[header_start + 5 : header_start + 9]
        else:
            break
        heads, tail, size = parts
        digits = len(raw)
        out += (heads[digits], raw, tail)
        added += size + digits
        n += 1
        pos = frame_end
    return pos, n, added


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode exactly one whole frame.

    Raises:
        MalformedFrame: a §9.1 violation.
        ValueError: the bytes are not exactly one frame.
    """
    decoder = FrameDecoder()
    decoder.feed(frame)
    cmd = decoder.next_command()
    if cmd is None or decoder.buffered:
        raise ValueError(f"not exactly one frame: {len(frame)} bytes")
    return cmd
