"""The table of every ``WIDEHOUSE_*`` variable (:data:`VARIABLES`) and the fields that follow from them."""

from __future__ import annotations

from typing import Any

from widehouse.settings.declarations import Derived, DerivedField, Variable
from widehouse.settings.defaults import STATE, under_state
from widehouse.settings.variables_jobs import JOB_VARIABLES
from widehouse.settings.variables_services import SERVICE_VARIABLES

VARIABLES: tuple[Variable[Any], ...] = (*SERVICE_VARIABLES, *JOB_VARIABLES)
"""Every variable, in the order the README and ``widehouse config --variables`` list them."""

DERIVED_FIELDS: tuple[DerivedField, ...] = (
    DerivedField("local.state_dir", Derived("<state>", (STATE,), lambda r: r[STATE])),
    DerivedField(
        "hive.metastore_db_dir",
        under_state("hive/metastore_db", "hive", "metastore_db", parse=str),
    ),
    DerivedField(
        "local.hive_warehouse_dir",
        Derived("<hive warehouse>", ("WIDEHOUSE_HIVE_WAREHOUSE",), lambda r: r["WIDEHOUSE_HIVE_WAREHOUSE"]),
    ),
    DerivedField("spark.local_dir", under_state("spark/tmp", "spark", "tmp", parse=str)),
    DerivedField("airflow.home", Derived("<state>/airflow", (STATE,), lambda r: r[STATE] / "airflow")),
)
"""Settings fields no variable sets; they follow from the variables named in ``uses``."""

_BY_NAME: dict[str, Variable[Any]] = {v.name: v for v in VARIABLES}
_BY_TARGET: dict[str, Variable[Any]] = {v.target: v for v in VARIABLES}


def declared_default(target: str) -> Any:
    """The table's default for a dataclass field (only for variables with a fixed default)."""
    default = _BY_TARGET[target].default
    if isinstance(default, Derived):  # a bug in this module: a derived default has no fixed value
        raise TypeError(f"{target} has a derived default")
    return default
