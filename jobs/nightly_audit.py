"""The nightly audit of one UTC day, in one Spark application.

    spark-submit jobs/nightly_audit.py --events DIR --lake DIR [--date YYYY-MM-DD] [--config FILE]
    nsaudit audit --events DIR --lake DIR [--date YYYY-MM-DD] [--master URL]
    nsaudit audit --events DIR --lake DIR --from YYYY-MM-DD --to YYYY-MM-DD [--force]
        (or spark-submit jobs/backfill.py with those arguments: every day of the range, jobs.backfill)

DIR is a local folder or ``s3a://bucket/prefix`` (``[storage]`` of the config says how to reach it).

Stages: ingest → rebuild → snapshots → liveness → divergence → distribution → security → incidents → report. Each stage
replaces that day's partitions of its tables in one Delta transaction per table, so a rerun gives
the same tables and adds nothing twice, and a failed run leaves every table at its previous
version (readable). The day counts as audited only when ``audit_runs`` records it ``ok``: a run
records it ``running`` before its first write and ``ok`` after its last (``failed`` when a stage
fails), so a run that dies part-way leaves the day visibly unfinished.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.arguments import OneLineParser, date_arg, master_arg
from common.config import Config, load_config
from common.errors import UserError
from common.timeutil import parse_date, yesterday_utc
from jobs.runlog import log_path, logging_to
from jobs.spark.work import spark_work
from jobs.storage import problems
from jobs.storage.locations import is_remote
from jobs.timing import timed

if TYPE_CHECKING:  # Spark is imported by the code that starts it
    from pyspark.sql import SparkSession

    from jobs.ingest.segments import SegmentFile

log = logging.getLogger("nsaudit.audit")

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
EXIT_FINDINGS = 3  # --fail-on matched: distinct from errors (1) and bad arguments (2)


@dataclass
class AuditOutcome:
    """What one audit run did: per-stage seconds and counts, findings by severity, report paths."""

    day: dt.date
    stages: list[dict[str, Any]] = field(default_factory=list)
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    incidents_by_severity: dict[str, int] = field(default_factory=dict)
    report_html: str | None = None
    report_json: str | None = None
    seconds: float = 0.0

    def worst_severity(self) -> str | None:
        """The most severe finding of the day, or None without findings."""
        present = [s for s, n in self.findings_by_severity.items() if n]
        return max(present, key=SEVERITY_RANK.__getitem__) if present else None


def _stage(
    spark: SparkSession, outcome: AuditOutcome, name: str, func: Callable[[], Any], progress: Callable[[str], None]
) -> Any:
    progress(f"[{len(outcome.stages) + 1}/{len(STAGES)}] {name} ...")
    before = spark_work(spark)
    with timed() as elapsed:
        result = func()
    seconds = elapsed.seconds
    counts = _counts(result)
    work = spark_work(spark, before) - before
    outcome.stages.append({"stage": name, "seconds": round(seconds, 2), **counts, **work.as_counts()})
    shown = ", ".join(f"{k}={v}" for k, v in counts.items())
    progress(f"[{len(outcome.stages)}/{len(STAGES)}] {name} done in {seconds:.1f} s" + (f" ({shown})" if shown else ""))
    return result


def _counts(result: Any) -> dict[str, Any]:
    """Integer fields of a stage result, for the stage log line and audit_runs."""
    if result is None:
        return {}
    if hasattr(result, "counts") and callable(result.counts):
        return dict(result.counts())
    values = getattr(result, "__dict__", {}) or {
        f: getattr(result, f) for f in getattr(result, "__dataclass_fields__", {})
    }
    return {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


STAGES = ("ingest", "rebuild", "snapshots", "liveness", "divergence", "distribution", "security", "incidents", "report")


def _failed_stage(stages_done: list[dict[str, Any]]) -> str:
    return STAGES[len(stages_done)] if len(stages_done) < len(STAGES) else "record"


def run(
    spark: SparkSession,
    config: Config,
    events_dir: str,
    lake_dir: str,
    day: dt.date,
    progress: Callable[[str], None],
    outcome: AuditOutcome | None = None,
    files: list[SegmentFile] | None = None,
) -> AuditOutcome:
    """Run every stage for ``day``; raises on the first failing stage (tables keep their versions).

    The plan settings follow the day's size (:mod:`jobs.spark.profile`). ``files``: the day's
    segments, when the caller has listed them (:func:`jobs.ingest.segments.list_day_segments`).

    Raises:
        IngestInputError: no segment for the day (nothing is written).
    """
    from jobs.ingest.segments import list_day_segments
    from jobs.spark.profile import day_profile

    outcome = outcome or AuditOutcome(day)
    if files is None:
        files = list_day_segments(events_dir, day)  # no segment for the day: an error, and the lake as it was
    with day_profile(spark, sum(f.bytes for f in files), config.spark.small_day_bytes):
        _run_stages(spark, config, events_dir, lake_dir, day, progress, outcome, files)
    return outcome


def _run_stages(
    spark: SparkSession,
    config: Config,
    events_dir: str,
    lake_dir: str,
    day: dt.date,
    progress: Callable[[str], None],
    outcome: AuditOutcome,
    files: list[SegmentFile],
) -> None:
    """The stages of :func:`run`, in order, between the day's ``running`` and ``ok`` rows."""
    from jobs import audit_day
    from jobs.lake import audit_runs
    from jobs.report import data as report_data

    def stage(name: str, func: Callable[[], Any]) -> Any:
        return _stage(spark, outcome, name, func, progress)

    audit_day.mark_running(spark, lake_dir, day)
    done = audit_day.run_finding_stages(stage, spark, config, events_dir, lake_dir, day, files)
    outcome.incidents_by_severity = dict(done.linked.incidents_by_severity)

    def write_report() -> None:
        # the rebuild's notes name the observed servers and their resolution
        data = report_data.collect_report_data(spark, lake_dir, day, done.rebuilt, done.live, done.div, done.dist)
        outcome.findings_by_severity = dict(data.headline.get("findings_by_severity", {}))
        outcome.report_html, outcome.report_json = report_data.write_day_report(lake_dir, data)
        return None

    stage("report", write_report)
    audit_runs.record(spark, lake_dir, day, "ok", outcome.stages, outcome.findings_by_severity)


def add_arguments(parser: argparse.ArgumentParser, master: str | None = None) -> None:
    """The audit's options, shared by ``nsaudit audit`` and ``spark-submit jobs/nightly_audit.py``."""
    from jobs.storage.arguments import events_arg, lake_arg

    parser.add_argument(
        "--events", required=True, metavar="DIR", type=events_arg, help="event-log directory, or s3a://bucket/prefix"
    )
    parser.add_argument(
        "--lake",
        required=True,
        metavar="DIR",
        type=lake_arg,
        help="lake directory (Delta tables), made when missing, or s3a://bucket/prefix",
    )
    parser.add_argument(
        "--date", default=None, metavar="YYYY-MM-DD", type=date_arg, help="UTC day to audit (default: yesterday)"
    )
    parser.add_argument(
        "--from",
        dest="from_date",
        default=None,
        metavar="YYYY-MM-DD",
        type=date_arg,
        help="backfill: audit every day from this one to --to, in order (not with --date)",
    )
    parser.add_argument(
        "--to",
        dest="to_date",
        default=None,
        metavar="YYYY-MM-DD",
        type=date_arg,
        help="backfill: the last day (with --from)",
    )
    parser.add_argument(
        "--force", action="store_true", help="backfill: audit the days already audited ok too (default: skip them)"
    )
    parser.add_argument("--config", default=None, metavar="FILE", help="TOML config (default conf/nsaudit.toml)")
    parser.add_argument(
        "--master", default=master, metavar="URL", type=master_arg, help="Spark master (default from config: local[*])"
    )
    parser.add_argument(
        "--fail-on",
        choices=("warning", "critical"),
        default=None,
        help="exit 3 when a finding of this severity or worse exists",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the stages' logs on stderr too (always in LAKE/_logs/DATE.log)",
    )


def main(argv: list[str] | None = None, *, master: str | None = None) -> int:
    """``spark-submit jobs/nightly_audit.py`` and ``nsaudit audit``; returns the exit code."""
    parser = OneLineParser(prog="nightly_audit.py", description=__doc__.splitlines()[0])
    add_arguments(parser, master)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run_from_cli(args)
    except UserError as exc:
        print(f"nightly_audit: error: {exc}", file=sys.stderr)
        return 2


def _checked_arguments(args: argparse.Namespace) -> tuple[Config, dt.date, str]:
    """The config, the day and the Spark master of a run, or a UserError naming the bad one.

    Namespaces built in code (``nsaudit demo``, tests) skip the parser, so the checks are repeated.
    """
    config = load_config(args.config)
    try:
        day = parse_date(args.date) if args.date else yesterday_utc()
    except ValueError as exc:
        raise UserError(f"--date: {exc}") from None
    master = checked_locations(args, config)
    return config, day, master


def checked_locations(args: argparse.Namespace, config: Config) -> str:
    """The Spark master, once it, ``--events`` and ``--lake`` are known to be usable; the
    object-store settings resolved (``jobs.storage.settings.configure``) and a local lake made.

    Raises:
        UserError: the one that is not, named.
    """
    from jobs.storage import settings
    from jobs.storage.arguments import events_arg, lake_arg, make_lake

    master = args.master or config.spark.master
    checks = (
        ("--master" if args.master else "[spark] master", master_arg, master),
        ("--events", events_arg, args.events),
        ("--lake", lake_arg, args.lake),
    )
    for option, check, value in checks:
        try:
            check(value)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{option}: {exc}") from None
    settings.configure(config)
    make_lake(args.lake)
    return master


def open_session(
    config: Config, master: str, app_name: str, args: argparse.Namespace, log_file: str, java_options: str | None = None
) -> SparkSession:
    """The run's SparkSession: the config's Spark settings and Delta writer, Spark's log to
    ``log_file``, hadoop-aws and the object-store settings when a path is on an object store;
    ``java_options``: the JVM's options when not the config's (a small day's,
    :func:`jobs.spark.profile.day_java_options`)."""
    from jobs.spark.session import build_session
    from jobs.storage import locations, settings

    remote = locations.is_remote(args.events) or locations.is_remote(args.lake)
    # under spark-submit, build_session leaves the submitted master and log configuration alone
    return build_session(
        master=master,
        app_name=app_name,
        shuffle_partitions=config.spark.shuffle_partitions,
        driver_memory=config.spark.driver_memory,
        java_options=config.spark.java_options if java_options is None else java_options,
        log_file=log_file,
        console_log=getattr(args, "verbose", False),
        lake_writer=config.lake.writer,
        object_store=settings.current() if remote else None,
    )


def _record_failure(spark: SparkSession, lake: str, day: dt.date, stages: list[dict[str, Any]]) -> None:
    """Turn the day's ``running`` row into ``failed``; when even that fails, ``running`` stays (not ok either)."""
    from jobs.lake import audit_runs

    try:
        audit_runs.record(spark, lake, day, "failed", stages, {})
    except Exception:
        log.exception("could not record the failed audit of %s", day)


def run_from_cli(args: argparse.Namespace) -> int:
    """Validate arguments, build the session, run, report; the exit code says how it went.

    Progress lines and errors go to stderr, the summary to stdout; the logs of Spark and of the
    stages go to :func:`log_path` (and to stderr too with ``args.verbose``). A range of days
    (``--from``/``--to``) is :mod:`jobs.backfill`'s, which runs this module's :func:`run` per day.
    """
    if getattr(args, "from_date", None) or getattr(args, "to_date", None) or getattr(args, "force", False):
        raise UserError(
            "--from, --to and --force audit a range of days: nsaudit audit, or spark-submit jobs/backfill.py"
        )
    config, day, master = _checked_arguments(args)
    from jobs.ingest.segments import list_day_segments
    from jobs.preflight import check_inputs
    from jobs.spark.profile import day_java_options

    check_inputs(args.events, args.lake, [day])  # before the first write: a bad input leaves the lake as it was
    path = log_path(args.lake, day)
    with logging_to(path, getattr(args, "verbose", False), args.lake):
        files = list_day_segments(args.events, day)
        java_options = day_java_options(
            config.spark.java_options, sum(f.bytes for f in files), config.spark.small_day_bytes
        )
        spark = open_session(config, master, f"nsaudit-audit-{day}", args, path, java_options)
        try:
            outcome = run_reporting_failure(spark, config, args, day, path, files)
        finally:
            spark.stop()
    if outcome is None:
        return 1
    print(json.dumps(summary(outcome), sort_keys=True))
    worst = outcome.worst_severity()
    if args.fail_on and worst and SEVERITY_RANK[worst] >= SEVERITY_RANK[args.fail_on]:
        print(f"nsaudit audit: findings of severity {worst} (--fail-on {args.fail_on})", file=sys.stderr)
        return EXIT_FINDINGS
    return 0


def run_reporting_failure(
    spark: SparkSession,
    config: Config,
    args: argparse.Namespace,
    day: dt.date,
    path: str,
    files: list[SegmentFile] | None = None,
) -> AuditOutcome | None:
    """Run the stages; on a failure, one line on stderr (the trace goes to the log) and None."""

    def progress(line: str) -> None:
        print(f"audit {day}: {line}", file=sys.stderr, flush=True)

    outcome = AuditOutcome(day)
    started = time.perf_counter()
    try:
        run(spark, config, args.events, args.lake, day, progress, outcome, files)
    except UserError:
        raise
    except Exception as exc:  # a failed stage: say which and why on one line, keep the trace in the log
        log.exception("audit of %s failed", day)
        _record_failure(spark, args.lake, day, outcome.stages)
        print(
            f"nsaudit audit: error: audit of {day} failed in stage {_failed_stage(outcome.stages)}: "
            f"{problems.one_line(exc, remote=is_remote(args.events) or is_remote(args.lake))} (log: {path})",
            file=sys.stderr,
        )
        return None
    outcome.seconds = round(time.perf_counter() - started, 1)
    return outcome


def summary(outcome: AuditOutcome) -> dict[str, Any]:
    """The JSON summary a run prints: day, seconds, findings and incidents by severity, report, stages."""
    return {
        "date": outcome.day.isoformat(),
        "seconds": outcome.seconds,
        "findings": outcome.findings_by_severity,
        "incidents": outcome.incidents_by_severity,
        "report": outcome.report_html,
        "stages": outcome.stages,
    }


if __name__ == "__main__":
    sys.exit(main())
