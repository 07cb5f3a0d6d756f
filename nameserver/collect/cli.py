"""``nsaudit collect``: its arguments and the foreground run until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys

from common.arguments import duration_ms_arg, int_arg
from common.config import MAX_COUNT, MAX_DURATION_MS, CollectConfig, ConfigError, EventLogConfig, load_config
from common.errors import UserError
from nameserver.collect.collector import Collector
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.live.rules import live_grace_ms
from nameserver.collect.targets import Target, parse_targets
from nameserver.metrics.endpoint import EndpointThread, MetricsEndpoint, listen_address

DESCRIPTION = (
    "Poll real name servers, each on its own connection, with read-only requests only "
    "(GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206, GET_ROUTEINFO_BY_TOPIC 105; "
    "never QUERY_DATA_VERSION 322 or anything that changes a server), and log what each answered into "
    "its own event stream under DIR: the full state at start, at each UTC day and after an outage, "
    "then only changes; a server that does not answer is logged too and retried with backoff. "
    "Prints one progress line per server and round on stderr. Every round is also judged live as the "
    "nightly audit judges the day: live incidents are logged as they open and close, and with "
    "--metrics-listen served as Prometheus metrics. SIGTERM/SIGINT: stop, write observe_stop, close the "
    "streams, exit 0."
)
EPILOG = (
    "Each entry of --namesrv is HOST:PORT or ID=HOST:PORT; the stream id (the folder under DIR and the "
    "events' ns) is ID, or obs-<host>-<port> by default. Exit status: 0 stopped by a signal or after "
    "--rounds, 1 an event stream could not be written, 2 bad arguments or configuration."
)


def _targets(text: str) -> tuple[Target, ...]:
    try:
        return parse_targets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``collect``'s options to ``parser``."""
    parser.add_argument(
        "--namesrv",
        required=True,
        type=_targets,
        metavar="HOST:PORT;HOST:PORT;...",
        help="the name servers to observe, as in a broker's namesrvAddr (';' or ',' between "
        "entries; quote it in a shell)",
    )
    parser.add_argument(
        "--events", required=True, metavar="DIR", help="event-log directory; each server's stream is DIR/<stream id>"
    )
    parser.add_argument(
        "--interval-ms",
        type=duration_ms_arg(1),
        default=None,
        metavar="N",
        help=f"start a round of every server this often, 1..{MAX_DURATION_MS} ms (ten years) (default "
        "[collect] interval_ms, 10000)",
    )
    parser.add_argument(
        "--rounds",
        type=int_arg(0, MAX_COUNT),
        default=0,
        metavar="N",
        help=f"stop after N rounds of each server, failed ones included, N in 0..{MAX_COUNT} (default 0: "
        "until SIGTERM/SIGINT)",
    )
    parser.add_argument(
        "--metrics-listen",
        default=None,
        type=listen_address,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: off; port 0 picks a "
        "free port, printed on stderr)",
    )
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config: [collect] timeouts, concurrency, backoff; [eventlog] durability; [audit] "
        "the divergence grace of the live judgement (default conf/nsaudit.toml)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the collector the parsed arguments describe; returns the exit code."""
    config = load_config(args.config)
    collect = config.collect
    if args.interval_ms is not None:
        try:
            collect = dataclasses.replace(collect, interval_ms=args.interval_ms)
        except ConfigError as exc:
            raise UserError(str(exc)) from None
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_serve(args, collect, config.eventlog, live_grace_ms(config, collect.interval_ms)))


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _serve(args: argparse.Namespace, collect: CollectConfig, eventlog: EventLogConfig, grace_ms: int) -> int:
    # one server observed: no other can confirm a perm change, so none is held for a round
    judge = LiveJudge(grace_ms, poll_ms=collect.interval_ms, alone=len(args.namesrv) == 1)
    collector = Collector(args.namesrv, args.events, collect, eventlog, _print, judge=judge)
    try:
        collector.start()
    except OSError as exc:
        raise UserError(f"cannot open the event streams under {args.events}: {exc}") from None
    endpoint = None
    if args.metrics_listen is not None:
        endpoint = EndpointThread(MetricsEndpoint(args.metrics_listen, collector.metrics_body))
        try:
            host, port = endpoint.start()
        except OSError as exc:
            for poller in collector.pollers:
                poller.writer.close("start failed")
            raise UserError(f"cannot serve metrics on {args.metrics_listen}: {exc}") from None
        _print(f"collect: metrics on http://{host}:{port}/metrics")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, collector.request_stop, sig.name)
    _print(
        f"collect: observing {', '.join(f'{t.addr} as {t.ns}' for t in collector.targets)} into {args.events}, "
        f"a round every {collect.interval_ms} ms, live divergence grace {grace_ms} ms"
    )
    try:
        await collector.run(args.rounds)
    finally:
        if endpoint is not None:
            endpoint.stop()
    if collector.failure is not None:
        _print(f"collect: stopped: an event stream could not be written: {collector.failure}")
        return 1
    _print(f"collect: stopped ({collector.stop_reason}); streams closed")
    return 0
