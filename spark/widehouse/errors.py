"""Widehouse's exception hierarchy.

Every error the library raises on purpose is a :class:`WidehouseError`. Each integration has one
child class, so callers (the CLI, Airflow tasks, tests) can catch what they can handle and let the
rest surface. Messages name the offending setting, service, topic, column or option, and the cause
is always chained (``raise ... from exc``).
"""

from __future__ import annotations


class WidehouseError(Exception):
    """Base class of every error Widehouse raises deliberately."""


class ConfigError(WidehouseError):
    """A setting (environment variable, option, file) has a bad or missing value."""


class ServiceError(WidehouseError):
    """A local service (Pulsar, HBase, HBase Thrift) failed to start, stop or answer."""


class PortInUseError(ServiceError):
    """A port a local service needs is already taken by another process."""


class SetupError(WidehouseError):
    """A part that `make setup` installs (JVM distribution, jars, venv) is missing."""


class ClickHouseError(WidehouseError):
    """ClickHouse (embedded chDB or a server) rejected a request or cannot be reached."""


class CatalogError(WidehouseError):
    """The topic / wide-table catalog in schemas/ is invalid."""


class PulsarError(WidehouseError):
    """Pulsar (client, admin REST or the Spark source) failed or was misused."""


class PlanError(WidehouseError):
    """The slot planner got input it cannot plan."""


class DeltaError(WidehouseError):
    """A Delta table the stream writes (delta-rs) cannot be created, read or appended to."""


class CheckpointError(WidehouseError):
    """A streaming group's checkpoint disagrees with what its sinks committed (lost or reset)."""


class HBaseError(WidehouseError):
    """HBase through Thrift failed."""


class BatchError(WidehouseError):
    """A batch job (finalize, daily merge) cannot go on; nothing was published."""


class NotReadyError(BatchError):
    """An hour may not be finalized yet: a slot group's watermark has not passed it."""


class ReconciliationError(BatchError):
    """The broker, the stream's counts and the stored rows disagree for an hour."""


class OrchestrationError(WidehouseError):
    """A scheduled or supervised run (Airflow task, streams supervisor) cannot do its job."""


class JobFailedError(OrchestrationError):
    """A job entrypoint run as a subprocess exited with an error (``code`` is its exit code)."""

    def __init__(self, message: str, code: int, retryable: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class MissingInputError(BatchError):
    """A batch job's input for the period is not there (e.g. a Hive partition of the day)."""
