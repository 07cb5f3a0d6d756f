"""``nsaudit fleet`` from the command line: the options checked, then one fleet run until its
duration ends or SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal

from common.config import load_config
from common.errors import UserError
from nameserver.acl import client_credentials
from nameserver.client import parse_host_port
from nameserver.fleet.live import Fleet, FleetOptions, parse_faults


def options_from_args(args: argparse.Namespace) -> FleetOptions:
    """Validate the ``nsaudit fleet`` arguments.

    Credentials come from the ``[security]`` section of ``--config`` (default
    ``conf/nsaudit.toml``): ``access_key`` and its secret from ``secrets_file`` / ``secrets_env``.

    Raises:
        UserError: a bad server list, count, duration, period or fault name, or unloadable secrets.
    """
    servers = []
    for item in (args.ns or "").split(","):
        if item.strip():
            try:
                servers.append(parse_host_port(item))
            except ValueError:
                raise UserError(f"--ns takes HOST:PORT,...; {item.strip()!r} is not HOST:PORT") from None
    if not servers:
        raise UserError("--ns needs at least one HOST:PORT")
    for name in ("brokers", "topics"):
        if getattr(args, name) < 0:
            raise UserError(f"--{name} must be >= 0, not {getattr(args, name)}")
    if not 0 <= args.slaves <= 253:
        raise UserError(f"--slaves must be in 0..253, not {args.slaves}")
    if not args.duration > 0:
        raise UserError(f"--duration must be > 0 seconds, not {args.duration}")
    if args.period_ms < 100:
        raise UserError(f"--period-ms must be >= 100, not {args.period_ms}")
    credentials = client_credentials(load_config(getattr(args, "config", None)).security)
    return FleetOptions(
        tuple(servers),
        args.brokers,
        args.slaves,
        args.topics,
        args.duration,
        args.period_ms,
        parse_faults(args.faults),
        args.seed,
        credentials,
    )


async def run_fleet(options: FleetOptions) -> int:
    """Start, run with faults until the duration ends or SIGTERM/SIGINT, stop cleanly."""
    fleet = Fleet(options)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, fleet.request_stop)
    await fleet.start()
    try:
        await fleet.run()
    finally:
        await fleet.stop()
    errors = sum(a.errors for a in fleet.agents)
    fleet.say(f"fleet: stopped; {len(fleet.injected)} faults injected, {errors} failed requests")
    return 0


def run_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit fleet``."""
    return asyncio.run(run_fleet(options_from_args(args)))
