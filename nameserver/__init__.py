"""The name server half: a RocketMQ-compatible name server, its event log and a fleet simulator."""


def package_version() -> str:
    """This package's version, logged in ``ns_start`` (by the server and the simulator alike)."""
    from importlib import metadata  # here, not at import: Spark workers import this package

    try:
        return metadata.version("nsaudit")
    except metadata.PackageNotFoundError:
        return "0.0.0"
