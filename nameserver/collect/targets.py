"""The ``--namesrv`` list: which servers to observe and the stream (``ns``) each one's events go to.

The list is RocketMQ's ``namesrvAddr`` form, ``HOST:PORT;HOST:PORT;…`` (commas work too). An entry
may name its stream, ``ID=HOST:PORT``; otherwise the stream is ``obs-<host>-<port>``, with every
character that is not a letter, digit, ``.`` or ``-`` of the host replaced by ``_`` (an IPv6 host's
colons, for example), so the id is a folder name and a Delta partition value as it stands.

Example:
    >>> parse_targets("10.0.0.1:9876;ns-b=10.0.0.2:9876")
    (Target(ns='obs-10.0.0.1-9876', host='10.0.0.1', port=9876), Target(ns='ns-b', host='10.0.0.2', port=9876))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


@dataclass(frozen=True)
class Target:
    """One observed name server.

    Attributes:
        ns: the id of its event stream (folder under ``--events``).
        host: host name or address.
        port: TCP port.
    """

    ns: str
    host: str
    port: int

    @property
    def addr(self) -> str:
        """``host:port`` (IPv6 hosts in brackets), as logged in ``namesrv_addr``."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def stream_id(host: str, port: int) -> str:
    """The default stream id of a server: ``obs-<host>-<port>`` made folder-safe."""
    return f"obs-{_UNSAFE.sub('_', host)}-{port}"


def parse_targets(text: str) -> tuple[Target, ...]:
    """Parse ``[ID=]HOST:PORT`` entries separated by ``;`` or ``,``.

    Raises:
        ValueError: an empty list, an entry that is not HOST:PORT with a port in 1..65535, an id
            that cannot be a folder name, or two entries with the same address or id; the message
            names the entry.
    """
    targets: list[Target] = []
    for item in (part.strip() for part in re.split(r"[;,]", text)):
        if not item:
            continue
        ns, eq, address = item.rpartition("=")
        host, sep, port = address.strip().rpartition(":")
        host = host.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not (sep and host and port.isdigit() and 0 < int(port) <= 65535):
            raise ValueError(f"{item!r} is not HOST:PORT with a port in 1..65535")
        ns = ns.strip() if eq else stream_id(host, int(port))
        if not _ID_RE.match(ns):
            raise ValueError(f"{item!r}: stream id {ns!r} must be letters, digits, '.', '_' or '-'")
        targets.append(Target(ns, host, int(port)))
    if not targets:
        raise ValueError("no HOST:PORT given")
    for attr in ("addr", "ns"):
        seen = [getattr(t, attr) for t in targets]
        dupes = sorted({v for v in seen if seen.count(v) > 1})
        if dupes:
            raise ValueError(f"{'address' if attr == 'addr' else 'stream id'} given twice: {', '.join(dupes)}")
    return tuple(targets)
