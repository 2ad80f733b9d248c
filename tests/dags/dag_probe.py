"""Parse dags/ the way the DAG processor does, in a fresh interpreter, and report as JSON.

Run as ``python -m tests.dags.dag_probe DAGS_DIR``. Connection and Variable lookups are trapped
(recorded, then failed), so a DAG file that reads one at parse time shows up as an error.
"""

from __future__ import annotations

import json
import sys
import time


def main(dags_dir: str) -> None:
    lookups: list[str] = []

    from airflow.sdk.definitions.connection import Connection
    from airflow.sdk.definitions.variable import Variable

    def trapped_connection(cls: object, conn_id: str) -> None:
        lookups.append(f"connection {conn_id}")
        raise RuntimeError(f"connection {conn_id} looked up at parse time")

    def trapped_variable(cls: object, key: str, *args: object, **kwargs: object) -> None:
        lookups.append(f"variable {key}")
        raise RuntimeError(f"variable {key} looked up at parse time")

    Connection.get = classmethod(trapped_connection)  # type: ignore[method-assign,assignment]
    Variable.get = classmethod(trapped_variable)  # type: ignore[method-assign,assignment]
    # what every sensor DAG pays once per process (the standard provider), outside the per-file times
    import airflow.providers.standard.sensors.python  # noqa: F401
    from airflow.dag_processing.dagbag import DagBag

    # ... and the library modules the DAG files share (~0.4 s cold)
    import widehouse.catalog
    import widehouse.orchestration.params  # noqa: F401

    started = time.monotonic()
    bag = DagBag(dag_folder=dags_dir)
    report = {
        "seconds": time.monotonic() - started,
        "errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "files": {s.file: s.duration.total_seconds() for s in bag.dagbag_stats},
        "lookups": lookups,
        "pyspark": sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")),
        "dags": {
            dag_id: {
                "tasks": sorted(t.task_id for t in dag.tasks),
                "owners": sorted({t.owner for t in dag.tasks}),
                "retries": sorted({t.retries for t in dag.tasks}),
                "tags": sorted(dag.tags),
                "doc_md": dag.doc_md or "",
                "schedule": str(getattr(dag.timetable, "description", "")),
                "catchup": dag.catchup,
                "params": sorted(dag.params.keys()),
                "outlets": sorted(
                    str(getattr(o, "uri", o)) for t in dag.tasks for o in getattr(t, "outlets", [])
                ),
                "sensor_modes": sorted({t.mode for t in dag.tasks if hasattr(t, "mode")}),
                "one_at_a_time": sorted(
                    t.task_id for t in dag.tasks if getattr(t, "max_active_tis_per_dag", None) == 1
                ),
            }
            for dag_id, dag in bag.dags.items()
        },
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
