"""The remoting command and its encoding into frames (docs/remoting-protocol.md §2-§5).

Re-exported by :mod:`nameserver.codec`; import from there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from nameserver.codec.constants import (
    MAX_FRAME_LENGTH,
    MAX_HEADER_LENGTH,
    RPC_ONEWAY,
    RPC_TYPE,
    SERVER_VERSION,
    LanguageCode,
    SerializeType,
)
from nameserver.codec.fastjson import quote

_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")  # length, (serializeType << 24) | headerLength
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_RMQ_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remarkLength (§5)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_LANGUAGE_NAMES = {int(lang): lang.name for lang in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One command: a request or a response (§3).

    Attributes:
        code: request code (§7) or response code (§9.2).
        language: a :class:`LanguageCode`, a raw byte of an unknown language (ROCKETMQ header),
            or ``UNKNOWN_LANGUAGE`` (JSON header with a missing or unknown name). Languages
            outside the table are sent as ``OTHER``.
        version: the sender's ``MQVersion`` ordinal.
        opaque: request id, copied into the response.
        flag: bit flags (§3.2).
        remark: optional text.
        ext_fields: the custom header, string -> string, or ``None``.
        body: the body; ``None`` when absent (an empty body is the same on the wire).
        serialize_type: the header serialization, :class:`SerializeType`.
    """

    code: int
    language: int = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Flag bit 0 set: this is a response."""
        return self.flag & RPC_TYPE == RPC_TYPE

    @property
    def is_oneway(self) -> bool:
        """Flag bit 1 set: a request that wants no response."""
        return self.flag & RPC_ONEWAY == RPC_ONEWAY


def make_request(
    code: int,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    *,
    opaque: int = 0,
    version: int = SERVER_VERSION,
    oneway: bool = False,
    serialize_type: int = SerializeType.JSON,
    remark: str | None = None,
) -> RemotingCommand:
    """A request as our tools send it: language JAVA, version 407 unless told (§3.5)."""
    flag = RPC_ONEWAY if oneway else 0
    return RemotingCommand(
        code, LanguageCode.JAVA, version, opaque, flag, remark, ext_fields, body or None, serialize_type
    )


def make_response(
    request: RemotingCommand,
    code: int,
    *,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    version: int = SERVER_VERSION,
) -> RemotingCommand:
    """The server's answer to ``request``: flag exactly 1, the request's opaque and serialize type
    (§3.1, §3.2), language JAVA, version 407."""
    return RemotingCommand(
        code,
        LanguageCode.JAVA,
        version,
        request.opaque,
        RPC_TYPE,
        remark,
        ext_fields,
        body or None,
        request.serialize_type,
    )


# --- encoding ---------------------------------------------------------------------------------


def mark_protocol_type(header_length: int, serialize_type: int) -> bytes:
    """Bytes 4..7 of a frame: ``(serializeType << 24) | (headerLength & 0xFFFFFF)`` (§2, T1/T2)."""
    return _U32.pack(((serialize_type & 0xFF) << 24) | (header_length & MAX_HEADER_LENGTH))


def _check_int32(name: str, value: int) -> int:
    value = int(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{name} {value} does not fit an int32")
    return value


def _json_header(cmd: RemotingCommand) -> bytes:
    """§4: alphabetical keys; extFields (keys sorted) and remark only when not None."""
    head, opaque, tail = _json_header_parts(cmd)
    return f"{head}{opaque}{tail}".encode("utf-8", "replace")


def _json_header_parts(cmd: RemotingCommand) -> tuple[str, str, str]:
    """The JSON header's text before the digits of ``opaque``, those digits, and the rest."""
    parts = ['{"code":', str(_check_int32("code", cmd.code))]
    if cmd.ext_fields is not None:
        entries = ",".join(quote(k) + ":" + quote(v) for k, v in sorted(cmd.ext_fields.items()) if v is not None)
        parts += [',"extFields":{', entries, "}"]
    parts += [
        ',"flag":',
        str(_check_int32("flag", cmd.flag)),
        ',"language":"',
        _LANGUAGE_NAMES.get(cmd.language, "OTHER"),
        '","opaque":',
    ]
    opaque = str(_check_int32("opaque", cmd.opaque))
    tail = [',"remark":', quote(cmd.remark)] if cmd.remark is not None else []
    tail += [',"serializeTypeCurrentRPC":"JSON","version":', str(_check_int32("version", cmd.version)), "}"]
    return "".join(parts), opaque, "".join(tail)


def _rocketmq_header(cmd: RemotingCommand) -> bytes:
    """§5: null or empty strings are not written, because they decode as null."""
    remark = cmd.remark.encode("utf-8", "replace") if cmd.remark else b""
    entries: list[bytes] = []
    for key, value in sorted((cmd.ext_fields or {}).items()):
        if key and value:
            key_bytes = key.encode("utf-8", "replace")
            value_bytes = value.encode("utf-8", "replace")
            if len(key_bytes) > 0x7FFF:
                raise ValueError(f"extFields key of {len(key_bytes)} bytes does not fit an int16 length")
            entries += [_I16.pack(len(key_bytes)), key_bytes, _I32.pack(len(value_bytes)), value_bytes]
    ext = b"".join(entries)
    language = cmd.language if 0 <= cmd.language <= 0xFF else LanguageCode.OTHER
    try:
        fixed = _RMQ_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag, len(remark))
    except struct.error:
        raise ValueError(
            f"code {cmd.code} and version {cmd.version} must fit an int16, "
            f"opaque {cmd.opaque} and flag {cmd.flag} an int32 (§5)"
        ) from None
    return b"".join((fixed, remark, _I32.pack(len(ext)), ext))


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header bytes of ``cmd`` in its serialize type (§4 or §5).

    Raises:
        ValueError: a value the header cannot carry (e.g. a ROCKETMQ code above 32767).
    """
    if cmd.serialize_type == SerializeType.JSON:
        return _json_header(cmd)
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return _rocketmq_header(cmd)
    raise ValueError(f"unknown serialize type {cmd.serialize_type}")


def encode_frame(cmd: RemotingCommand) -> bytes:
    """One whole frame (§2): length, type and header length, header, body.

    Raises:
        ValueError: the frame would exceed 16 MiB, or the header cannot carry a value.
    """
    header = encode_header(cmd)
    body = cmd.body or b""
    length = 4 + len(header) + len(body)
    if len(header) > MAX_HEADER_LENGTH or length > MAX_FRAME_LENGTH:
        raise ValueError(f"frame length {length} over the 16 MiB limit (§2)")
    return b"".join((_PREFIX.pack(length, (int(cmd.serialize_type) << 24) | len(header)), header, body))


class ResponseFrame:
    """One response encoded once, for any ``opaque``: ``frame(opaque)`` equals
    ``encode_frame`` of the command with that opaque, byte for byte, at the cost of filling in
    the opaque (a route lookup's answer differs between clients only there).

    Args:
        cmd: the response; its own ``opaque`` is ignored.

    Raises:
        ValueError: ``encode_frame`` would refuse the command for some opaque (a field that does
            not fit its header, or a frame over 16 MiB with the longest opaque).

    Example:
        >>> answer = make_response(make_request(105, {"topic": "T"}), 0, body=b"{}")
        >>> ResponseFrame(answer).frame(7) == encode_frame(make_response(make_request(105, opaque=7), 0, body=b"{}"))
        True
    """

    __slots__ = ("_head", "_tail", "_json", "_heads", "_lengths")

    def __init__(self, cmd: RemotingCommand) -> None:
        body = cmd.body or b""
        if cmd.serialize_type == SerializeType.JSON:
            head, _, tail = (text.encode("utf-8", "replace") for text in _json_header_parts(cmd))
            header_length = len(head) + len(tail)  # without the opaque's digits (1 to 11)
            length = 4 + header_length + len(body)
            if header_length + 11 > MAX_HEADER_LENGTH or length + 11 > MAX_FRAME_LENGTH:
                raise ValueError(f"frame length {length + 11} over the 16 MiB limit (§2)")
            self._json = True
            self._head, self._tail = head, tail + body
            # The 8 prefix bytes then only depend on the number of digits: prefix + head for each
            # count, made when first needed (an opaque counter keeps its count for a long time).
            self._heads: list[bytes | None] = [None] * 12
            self._lengths = (length, header_length)
        else:
            frame = encode_frame(
                RemotingCommand(
                    cmd.code,
                    cmd.language,
                    cmd.version,
                    0,
                    cmd.flag,
                    cmd.remark,
                    cmd.ext_fields,
                    cmd.body,
                    cmd.serialize_type,
                )
            )
            # §5: the opaque is bytes 5-8 of the fixed header, after the 8 bytes of the prefix
            self._json = False
            self._head, self._tail = frame[:13], frame[17:]
            self._heads = []
            self._lengths = (0, 0)

    def frame(self, opaque: int) -> bytes:
        """The whole frame answering the request ``opaque``.

        Raises:
            ValueError: ``opaque`` does not fit an int32.
        """
        if not _INT32_MIN <= opaque <= _INT32_MAX:
            raise ValueError(f"opaque {opaque} does not fit an int32")
        if self._json:
            digits = b"%d" % opaque
            head = self._heads[len(digits)]
            if head is None:
                length, header_length = self._lengths
                n = len(digits)
                head = self._heads[n] = _PREFIX.pack(length + n, header_length + n) + self._head
            return b"".join((head, digits, self._tail))
        return b"".join((self._head, _I32.pack(opaque), self._tail))

    def splice_parts(self) -> tuple[tuple[bytes | None, ...], bytes, int]:
        """``(heads, tail, size)`` such that ``heads[len(raw)] + raw + tail`` is :meth:`frame` of
        the opaque that ``raw`` writes as the request's header does: its decimal digits (JSON,
        canonical: no ``-0``, no leading zero) or its 4 big-endian bytes (ROCKETMQ); that frame
        has ``size + len(raw)`` bytes. For a caller that has the request's bytes and no decoded
        opaque (``FrameDecoder.answer_known``)."""
        size = 8 + len(self._head) + len(self._tail) if self._json else len(self._head) + len(self._tail)
        if self._json:
            length, header_length = self._lengths
            heads = tuple(_PREFIX.pack(length + n, header_length + n) + self._head if n else None for n in range(12))
            return heads, self._tail, size
        return (None, None, None, None, self._head), self._tail, size
