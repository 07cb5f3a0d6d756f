"""Decoding a command's header in either serialize type (docs/remoting-protocol.md §4 JSON, §5
ROCKETMQ), and :class:`MalformedFrame` with its reasons (§9.1)."""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson

from nameserver.codec.constants import LANGUAGE_BY_NAME, ROCKETMQ_FIXED_HEADER_BYTES, UNKNOWN_LANGUAGE, LanguageCode

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_RMQ_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remarkLength (§5)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_LANGUAGES = {int(lang): lang for lang in LanguageCode}
_STR_ONLY = frozenset((str,))

# a header's seven fields in RemotingCommand order: code, language, version, opaque, flag, remark, ext_fields
HeaderFields = tuple[int, int, int, int, int, "str | None", "dict[str, str] | None"]


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


def _json_int(obj: dict[str, Any], name: str, decoded: dict[str, Any]) -> int:
    value = obj.get(name)
    if value is None:
        return 0  # §4: a missing code, flag, opaque or version reads as 0
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        raise MalformedFrame(REASON_JSON_HEADER_FIELD, decoded, f"{name} is not an int32: {value!r}")
    decoded[name] = value
    return value


def _ints_read(obj: dict[str, Any]) -> dict[str, Any]:
    """The header ints of ``obj`` that were decoded (all valid by now; an absent one reads as 0
    and is not reported)."""
    return {name: obj[name] for name in ("code", "flag", "opaque", "version") if obj.get(name) is not None}


def _scalar_text(value: Any) -> str:
    return value if type(value) is str else orjson.dumps(value).decode()


def decode_json_header(raw: bytes | bytearray) -> tuple[HeaderFields, bool]:
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
    if not (
        type(code) is int
        and type(flag) is int
        and type(opaque) is int
        and type(version) is int
        and INT32_MIN <= code <= INT32_MAX
        and INT32_MIN <= flag <= INT32_MAX
        and INT32_MIN <= opaque <= INT32_MAX
        and INT32_MIN <= version <= INT32_MAX
    ):
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


def decode_rocketmq_header(buf: bytearray, start: int, end: int) -> HeaderFields:
    """The seven header fields of a ROCKETMQ header (§5), in ``RemotingCommand`` order.

    Raises:
        MalformedFrame: as :func:`decode_json_header`.
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
