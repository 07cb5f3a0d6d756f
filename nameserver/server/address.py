"""The name server's listen address, as written in ``--listen`` and ``nameserver.listen``."""

from __future__ import annotations

from common.errors import UserError


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) to ``(host, port)``.

    Raises:
        UserError: not HOST:PORT or a port outside 0..65535.
    """
    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UserError(f"--listen must be HOST:PORT with a port in 0..65535, not {text!r}")
    return host, int(port_text)
