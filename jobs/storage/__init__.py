"""Where the events and the lake live: a local folder or an S3-compatible bucket (``s3a://``).

- :mod:`jobs.storage.locations`: what ``--events`` and ``--lake`` may name, normalised once.
- :mod:`jobs.storage.settings`: ``[storage]`` and the AWS environment, resolved once per command;
  the options ``deltalake`` and Spark's S3A filesystem take.
- :mod:`jobs.storage.stores`: the task side, a store as a pyarrow filesystem (shipped to executors).
- :mod:`jobs.storage.files`: small driver-side file operations (reports, logs) on either kind.
- :mod:`jobs.storage.problems`: a store's failures as one line, without secrets, and the checks
  a command makes before its first write.
"""
