"""How much Spark work a piece of the audit started: jobs, stages and tasks.

An audit of a small day spends its time on Spark's fixed costs (planning, scheduling and starting
tasks for each job), so the stages report these counts beside their seconds (``nsaudit audit``'s
stage lines, ``audit_runs.stages``, ``bench/bench_audit.py``). They are read from the driver's
status store, which keeps the finished jobs whether or not the UI runs.

Example:
    >>> before = spark_work(spark)
    >>> spark.range(10).count()
    >>> spark_work(spark) - before
    SparkWork(jobs=1, stages=1, tasks=1)
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession


@dataclass(frozen=True)
class SparkWork:
    """Jobs, stages and tasks Spark ran (or started) up to some moment, or between two.

    ``last_job`` is the highest job id seen, so that a difference counts the jobs started in
    between even when the status store has already dropped older ones.
    """

    jobs: int = 0
    stages: int = 0
    tasks: int = 0
    last_job: int = -1

    def __sub__(self, earlier: SparkWork) -> SparkWork:
        return SparkWork(
            self.jobs - earlier.jobs, self.stages - earlier.stages, self.tasks - earlier.tasks, self.last_job
        )

    def as_counts(self) -> dict[str, int]:
        """``spark_jobs``, ``spark_stages``, ``spark_tasks``: a stage line's and ``audit_runs``' keys."""
        return {"spark_jobs": self.jobs, "spark_stages": self.stages, "spark_tasks": self.tasks}


def spark_work(spark: SparkSession, since: SparkWork | None = None) -> SparkWork:
    """The jobs Spark has started in this application, with their stages (skipped ones included,
    as the UI counts them) and tasks.

    Args:
        spark: the session.
        since: an earlier reading; only jobs started after it are added to it (the status store
            keeps ``spark.ui.retainedJobs`` jobs, so totals are kept as running sums).
    """
    since = since or SparkWork()
    store = spark.sparkContext._jsc.sc().statusStore()  # py4j: the driver's status store
    jobs = store.jobsList(None)
    added_jobs = added_stages = added_tasks = 0
    last_job = since.last_job
    for i in range(jobs.size()):
        job = jobs.apply(i)
        job_id = job.jobId()
        if job_id <= since.last_job:
            continue
        added_jobs += 1
        added_stages += job.stageIds().size()
        added_tasks += job.numTasks()
        last_job = max(last_job, job_id)
    return SparkWork(since.jobs + added_jobs, since.stages + added_stages, since.tasks + added_tasks, last_job)
