"""``nsaudit nameserver``: the server's settings from the config file and flags, then one server
run in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys

from common.config import EventLogConfig, NameServerConfig, load_config
from common.errors import UserError
from nameserver.acl import AccessController, exposure_notice, load_secret_store
from nameserver.codec import MAX_INFLATED_BYTES
from nameserver.eventlog.writer import EventLogError
from nameserver.metrics.endpoint import EndpointThread, MetricsEndpoint
from nameserver.server.address import parse_listen
from nameserver.server.controller import NameServerController
from nameserver.server.memory import keep_freed_memory
from nameserver.server.metrics import server_body

DURABILITY_NONE_NOTICE = (
    '[eventlog] durability = "none": answers do not wait for the log, and a crash loses the events '
    "still buffered (acknowledged changes); the next run skips their seqs, so the audit reports the "
    'loss as seq_gap. Use "group" (the default) to keep them.'
)


def build_config(args: argparse.Namespace) -> tuple[NameServerConfig, EventLogConfig, AccessController | None]:
    """``--config`` file overridden by the flags (docs/interfaces.md, ``nameserver`` command), and the
    access control of its ``[security]`` section (None when off). Secrets come only from the
    file or environment variable that section names, never from flags.

    Raises:
        UserError: a bad config file or flag value, or secrets that cannot be loaded.
    """
    config = load_config(args.config)
    ns = config.nameserver
    overrides = {}
    if args.listen is not None:
        overrides["listen"] = args.listen
    if args.broker_expiry_ms is not None:
        overrides["broker_expiry_ms"] = args.broker_expiry_ms
    if args.scan_interval_ms is not None:
        overrides["scan_interval_ms"] = args.scan_interval_ms
    ns = dataclasses.replace(ns, **overrides)
    parse_listen(ns.listen)
    for name in ("broker_expiry_ms", "scan_interval_ms"):
        if getattr(ns, name) <= 0:
            raise UserError(f"{name.replace('_', '-')} must be > 0, not {getattr(ns, name)}")
    for name in ("first_scan_delay_ms", "channel_idle_ms", "frame_timeout_ms"):
        if getattr(ns, name) < 0:
            raise UserError(f"nameserver.{name} must be >= 0, not {getattr(ns, name)}")
    for name in ("max_connections", "max_connections_per_host"):
        if getattr(ns, name) < 1:
            raise UserError(f"nameserver.{name} must be >= 1, not {getattr(ns, name)}")
    if not 1024 <= ns.max_frame_bytes <= 16_777_216:
        raise UserError(f"nameserver.max_frame_bytes must be in 1024..16777216, not {ns.max_frame_bytes}")
    if ns.max_register_topics < 1:
        raise UserError(f"nameserver.max_register_topics must be >= 1, not {ns.max_register_topics}")
    if not 1024 <= ns.max_register_body_bytes <= MAX_INFLATED_BYTES:
        raise UserError(
            f"nameserver.max_register_body_bytes must be in 1024..{MAX_INFLATED_BYTES}, "
            f"not {ns.max_register_body_bytes}"
        )
    if ns.max_buffered_bytes < ns.max_frame_bytes:
        raise UserError(
            f"nameserver.max_buffered_bytes must be >= max_frame_bytes ({ns.max_frame_bytes}), "
            f"not {ns.max_buffered_bytes}"
        )
    if not args.ns_id or "/" in args.ns_id or args.ns_id.startswith("."):
        raise UserError(f"--ns-id {args.ns_id!r} cannot be used as a folder name")
    security = config.security
    access = AccessController.from_config(security, load_secret_store(security)) if security.enabled else None
    return ns, config.eventlog, access


async def serve(
    ns_id: str,
    events_dir: str,
    config: NameServerConfig,
    eventlog_config: EventLogConfig,
    access: AccessController | None = None,
    metrics_listen: str | None = None,
) -> int:
    """Run one server until SIGTERM/SIGINT; print the ready line once it accepts connections,
    after a warning on stderr when the bound address is reachable from the network or the log
    is not fsynced. With ``metrics_listen``, serve its metrics there (the address on stderr).

    Returns:
        0 after a clean shutdown, 1 after a fatal event-log failure.
    """
    controller = NameServerController(ns_id, events_dir, config, eventlog_config, access=access)
    try:
        host, port = await controller.start()
    except (OSError, EventLogError) as exc:
        raise UserError(f"cannot start name server {ns_id} on {config.listen}: {exc}") from None
    endpoint = None
    if metrics_listen is not None:
        endpoint = EndpointThread(MetricsEndpoint(metrics_listen, lambda: server_body(controller)))
        try:
            m_host, m_port = endpoint.start()
        except OSError as exc:
            await controller.shutdown("metrics endpoint failed")
            raise UserError(f"cannot serve metrics on {metrics_listen}: {exc}") from None
        print(f"nameserver {ns_id}: metrics on http://{m_host}:{m_port}/metrics", file=sys.stderr, flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, controller.request_stop, sig.name)
    shown = f"[{host}]" if ":" in host else host
    notice = exposure_notice(host, access is not None)
    if notice is not None:
        print(f"nameserver {ns_id}: {notice}", file=sys.stderr, flush=True)
    if eventlog_config.durability == "none":
        print(f"nameserver {ns_id}: {DURABILITY_NONE_NOTICE}", file=sys.stderr, flush=True)
    sys.stdout.write(f"nameserver {ns_id} listening on {shown}:{port}\n")
    sys.stdout.flush()
    await controller.wait_stopped()
    if endpoint is not None:
        endpoint.stop()
    return 1 if controller.failure is not None else 0


def run_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit nameserver``: run in the foreground; exit 0 on SIGTERM/SIGINT."""
    ns, eventlog_config, access = build_config(args)
    keep_freed_memory()  # the process is the server's own: its large frames reuse freed pages
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(
        serve(args.ns_id, args.events, ns, eventlog_config, access, getattr(args, "metrics_listen", None))
    )
