"""Incremental frame decoding and the malformed-frame rules (remoting protocol §2, §4, §5, §9.1).

Re-exported by :mod:`nameserver.codec`; import from there.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Iterator

import orjson

from nameserver.codec.command import RemotingCommand
from nameserver.codec.memo import OPAQUE_SPLIT, HeaderMemo
from nameserver.codec.constants import (
    LANGUAGE_BY_NAME,
    MAX_FRAME_BYTES,
    MAX_HEADER_LENGTH,
    ROCKETMQ_FIXED_HEADER_BYTES,
    UNKNOWN_LANGUAGE,
    LanguageCode,
    SerializeType,
)

_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")  # length, (serializeType << 24) | headerLength
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_RMQ_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remarkLength (§5)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_LANGUAGES = {int(lang): lang for lang in LanguageCode}
# By value, so the decoder does not call the enum for every frame (both values are valid); the
# plain ints because an enum member costs a class attribute lookup (~0.1 us) on every use.
_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)
_JSON, _ROCKETMQ = int(SerializeType.JSON), int(SerializeType.ROCKETMQ)
_ROCKETMQ_WORD = _ROCKETMQ << 24  # a header word below it is JSON's
_STR_ONLY = frozenset((str,))
# What FrameDecoder.last_key gives and answer_known looks up: a header without its opaque
RequestKey = tuple[bytes, bytes] | bytes


class MalformedFrame(Exception):
    """A frame that cannot be used (§9.1): the connection must be closed, without a reply.

    Attributes:
        reason: a stable identifier, one of the ``REASON_*`` constants of this module.
        decoded_so_far: what was decoded before the fault, for the ``rejected`` event:
            ``frame_length``, ``serialize_type``, ``header_length``, then header fields
            (``code``, ``language``, ``version``, ``opaque``, ``flag``) when known.
        detail: human-readable specifics.
    """

    def __init__(self, reason: str, decoded_so_far: dict[str, Any], detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.decoded_so_far = decoded_so_far
        self.detail = detail


REASON_LENGTH_TOO_SMALL = "length_too_small"
REASON_FRAME_TOO_LARGE = "frame_too_large"
REASON_HEADER_LENGTH_OVERRUN = "header_length_overrun"
REASON_UNKNOWN_SERIALIZE_TYPE = "unknown_serialize_type"
REASON_JSON_HEADER_INVALID = "json_header_invalid"
REASON_JSON_HEADER_NOT_OBJECT = "json_header_not_object"
REASON_JSON_HEADER_FIELD = "json_header_field"
REASON_ROCKETMQ_HEADER_SHORT = "rocketmq_header_short"
REASON_ROCKETMQ_HEADER_LENGTH = "rocketmq_header_length"
REASON_ROCKETMQ_HEADER_LEFTOVER = "rocketmq_header_leftover"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_int(obj: dict, name: str, decoded: dict[str, Any]) -> int:
    value = obj.get(name)
    if value is None:
        return 0  # §4: a missing code, flag, opaque or version reads as 0
    if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        raise MalformedFrame(REASON_JSON_HEADER_FIELD, decoded, f"{name} is not an int32: {value!r}")
    decoded[name] = value
    return value


def _ints_read(obj: dict) -> dict[str, Any]:
    """The header ints of ``obj`` that were decoded (all valid by now; an absent one reads as 0
    and is not reported)."""
    return {name: obj[name] for name in ("code", "flag", "opaque", "version") if obj.get(name) is not None}


def _scalar_text(value: Any) -> str:
    return value if type(value) is str else orjson.dumps(value).decode()


def _decode_json_header(raw: bytes | bytearray) -> tuple[tuple, bool]:
    """The seven header fields of a JSON header (§4), in ``RemotingCommand`` order, and whether
    the header has a top-level ``opaque`` member (an absent one reads as 0 too).

    Raises:
        MalformedFrame: its ``decoded_so_far`` holds only the header fields read before the fault
            (the caller adds the frame's shape).
    """
    decoded: dict[str, Any] = {}
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # §9.1: invalid UTF-8 becomes U+FFFD; the stdlib also takes lone surrogate escapes.
        try:
            obj = json.loads(raw.decode("utf-8", "replace"), parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise MalformedFrame(REASON_JSON_HEADER_INVALID, decoded, str(exc)) from None
    if type(obj) is not dict:
        raise MalformedFrame(REASON_JSON_HEADER_NOT_OBJECT, decoded, type(obj).__name__)
    get = obj.get
    code, flag, opaque, version = get("code"), get("flag"), get("opaque"), get("version")
    # Every header of ours and of Java clients carries the four as int32s: check them in one go;
    # anything else (absent, not an int, out of range) takes the field-by-field path of §4.
    if not (type(code) is int and type(flag) is int and type(opaque) is int and type(version) is int
            and _INT32_MIN <= code <= _INT32_MAX and _INT32_MIN <= flag <= _INT32_MAX
            and _INT32_MIN <= opaque <= _INT32_MAX and _INT32_MIN <= version <= _INT32_MAX):
        code = _json_int(obj, "code", decoded)
        flag = _json_int(obj, "flag", decoded)
        opaque = _json_int(obj, "opaque", decoded)
        version = _json_int(obj, "version", decoded)
    language = get("language")
    language = LANGUAGE_BY_NAME.get(language, UNKNOWN_LANGUAGE) if type(language) is str else UNKNOWN_LANGUAGE
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        remark = _scalar_text(remark)  # fastjson reads any value into a String field as its text
    ext = get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise MalformedFrame(REASON_JSON_HEADER_FIELD, _ints_read(obj), "extFields is not an object")
        if not _STR_ONLY.issuperset(map(type, ext.values())):  # one C pass over the values
            if any(isinstance(v, (dict, list)) for v in ext.values()):
                raise MalformedFrame(REASON_JSON_HEADER_FIELD, _ints_read(obj), "nested value in extFields")
            # §4: scalars become their JSON text; a null value is an absent field.
            ext = {k: _scalar_text(v) for k, v in ext.items() if v is not None}
    return (code, language, version, opaque, flag, remark, ext), get("opaque") is not None


def _decode_rocketmq_header(buf: bytearray, start: int, end: int) -> tuple:
    """The seven header fields of a ROCKETMQ header (§5), in ``RemotingCommand`` order.

    Raises:
        MalformedFrame: as :func:`_decode_json_header`.
    """
    decoded: dict[str, Any] = {}
    if end - start < ROCKETMQ_FIXED_HEADER_BYTES:
        raise MalformedFrame(REASON_ROCKETMQ_HEADER_SHORT, decoded, f"{end - start} bytes")
    code, language, version, opaque, flag, remark_length = _RMQ_FIXED.unpack_from(buf, start)
    decoded.update(code=code, language=language, version=version, opaque=opaque, flag=flag)
    pos = start + 17
    # The remark and the 4-byte ext length must both fit (§5 strictness).
    if remark_length < 0 or pos + remark_length + 4 > end:
        raise MalformedFrame(REASON_ROCKETMQ_HEADER_LENGTH, decoded, f"remark length {remark_length}")
    remark = buf[pos : pos + remark_length].decode("utf-8", "replace") if remark_length else None
    pos += remark_length
    (ext_length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if ext_length < 0 or pos + ext_length > end:
        raise MalformedFrame(REASON_ROCKETMQ_HEADER_LENGTH, decoded, f"ext length {ext_length}")
    ext_end = pos + ext_length
    if ext_end != end:
        raise MalformedFrame(REASON_ROCKETMQ_HEADER_LEFTOVER, decoded, f"{end - ext_end} bytes after ext")
    ext: dict[str, str] | None = None
    if ext_length:
        ext = {}
        while pos < ext_end:
            if pos + 2 > ext_end:
                raise MalformedFrame(REASON_ROCKETMQ_HEADER_LENGTH, decoded, "entry overruns ext")
            (key_length,) = _I16.unpack_from(buf, pos)
            pos += 2
            if key_length < 0 or pos + key_length + 4 > ext_end:
                raise MalformedFrame(REASON_ROCKETMQ_HEADER_LENGTH, decoded, f"key length {key_length}")
            key = buf[pos : pos + key_length].decode("utf-8", "replace")
            pos += key_length
            (value_length,) = _I32.unpack_from(buf, pos)
            pos += 4
            if value_length < 0 or pos + value_length > ext_end:
                raise MalformedFrame(REASON_ROCKETMQ_HEADER_LENGTH, decoded, f"value length {value_length}")
            if key_length and value_length:  # a zero length decodes as null: the entry is absent
                ext[key] = buf[pos : pos + value_length].decode("utf-8", "replace")
            pos += value_length
    return code, _LANGUAGES.get(language, language), version, opaque, flag, remark, ext


class FrameDecoder:
    """Incremental frame decoder for one connection (§1, §2, §9.1).

    Feed bytes as they arrive; frames may be split at any byte and one read may hold several.
    Complete commands come out in order. The buffer is a ``bytearray`` read by offset: a frame's
    bytes are copied once (header and body), the buffer is compacted only when the decoder
    waits for more data. A length field outside 4..``max_frame_bytes - 4`` is refused as soon
    as its 4 bytes arrive, and the header word as soon as its 4 bytes arrive, before any body
    is awaited. After a :class:`MalformedFrame` the decoder stays failed.

    Example:
        >>> decoder = FrameDecoder()
        >>> decoder.feed(bytes.fromhex("0000001c 01000016 0011")[:9])  # 9 bytes of G3
        >>> decoder.next_command() is None
        True
    """

    __slots__ = ("_buf", "_pos", "_max_length", "_error", "_memo", "last_key")

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

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a command (a partial frame when > 0)."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes. Raises the earlier :class:`MalformedFrame` once failed."""
        if self._error is not None:
            raise self._error
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
        header_start = pos + 8
        header_end = header_start + header_length
        try:
            if serialize_type == _JSON:
                # The memo serves requests without a body: they are the ones sent again and again
                # (route polls, heartbeats); a registration's header names its body's CRC.
                memo = self._memo if frame_end == header_end else None
                fields = key = None
                if memo is not None:
                    fields, key = memo.recall(buf, header_start, header_end)
                if fields is None:
                    fields, has_opaque = _decode_json_header(buf[header_start:header_end])  # orjson reads a bytearray
                    if key is not None and not (has_opaque and memo.keep(key, buf, header_start, header_end, fields)):
                        key = None
                if key is not None:
                    before, _, after = OPAQUE_SPLIT.split(bytes(buf[header_start:header_end]), 1)
                    key = (before, after)
            else:
                fields = _decode_rocketmq_header(buf, header_start, header_end)
                # every byte but the opaque's decides the fields: the key is exact (§5)
                key = (bytes(buf[pos + 4:header_start + 5]) + bytes(buf[header_start + 9:header_end])
                       if frame_end == header_end else None)
        except MalformedFrame as exc:
            decoded = {"frame_length": length, "serialize_type": serialize_type, "header_length": header_length}
            decoded.update(exc.decoded_so_far)
            raise self._fail(exc.reason, decoded, exc.detail) from None
        body = bytes(buf[header_end:frame_end]) if frame_end > header_end else None
        self.last_key = key
        if frame_end == end:  # everything consumed: reset without copying
            buf.clear()
            self._pos = 0
        else:
            self._pos = frame_end
        return RemotingCommand(*fields, body, _SERIALIZE_TYPES[serialize_type])

    def answer_known(self, answers: dict[RequestKey, tuple], out: list[bytes], max_frames: int,
                     max_bytes: int) -> tuple[int, int]:
        """Answer the complete frames at the head of the buffer whose key (:attr:`last_key`) is
        in ``answers``, without decoding them; stop at the first other one (incomplete, with a
        body, malformed, unknown), which :meth:`next_command` then reads as usual.

        The requests a client sends again and again (route lookups) come here: one read holds
        many, and each costs a key and a dict lookup instead of a command and its handling.

        Args:
            answers: key -> ``ResponseFrame.splice_parts()`` of the answer to every request
                with that key, as it is now (the caller drops them when it changes). Only keys
                :attr:`last_key` gave: exact, so a frame with such a key is well-formed and
                differs from the request that key came from only in its opaque.
            out: the answers are appended here, in order, each as three pieces (their
                concatenation is the frame: the caller joins the whole batch once).
            max_frames: answer at most this many frames.
            max_bytes: stop once the answers appended reach this many bytes.

        Returns:
            ``(frames consumed, bytes appended)``.
        """
        if self._error is not None:
            return 0, 0
        buf, pos = self._buf, self._pos
        end = len(buf)
        max_length = self._max_length
        split = OPAQUE_SPLIT.split
        get = answers.get
        unpack = _PREFIX.unpack_from
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
                if raw == b"-0" or (len(raw) >= 10 and not _INT32_MIN <= int(raw) <= _INT32_MAX):
                    break  # "-0" is read as 0 (written "0"); 10 digits may not fit an int32 (refused)
            elif word >> 24 == _ROCKETMQ:  # the key holds the header length: same as the known one
                parts = get(bytes(buf[pos + 4:header_start + 5]) + bytes(buf[header_start + 9:frame_end]))
                if parts is None:
                    break
                raw = buf[header_start + 5:header_start + 9]
            else:
                break
            heads, tail, size = parts
            digits = len(raw)
            out += (heads[digits], raw, tail)
            added += size + digits
            n += 1
            pos = frame_end
        if n:
            if pos == end:
                buf.clear()
                pos = 0
            self._pos = pos
        return n, added

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
