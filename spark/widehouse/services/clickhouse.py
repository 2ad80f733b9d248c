"""The local ClickHouse service: the chDB engine hosted behind ClickHouse's HTTP interface.

No ClickHouse server binary can be installed here, so one Python process
(:mod:`widehouse.clickhouse.server`) holds the engine on ``<state>/services/clickhouse/data`` and
serves clickhouse-connect's HTTP protocol on loopback; every process (streams, batch jobs, CLI,
Airflow tasks, tests) reaches it at ``WIDEHOUSE_CLICKHOUSE_DSN``'s default URL, as it would a server.
It always runs with a password: ``WIDEHOUSE_CLICKHOUSE_PASSWORD``, else the one ``widehouse services
up`` generated for the state dir (:mod:`widehouse.private`).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from widehouse.errors import ConfigError
from widehouse.services.base import LocalService
from widehouse.services.process import PortSpec


class ClickHouseService(LocalService):
    name = "clickhouse"

    def ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("http", self.local.clickhouse_port, "WIDEHOUSE_CLICKHOUSE_PORT"),)

    def command(self) -> tuple[str, ...]:
        if self.local.clickhouse_password is None:
            raise ConfigError(
                "the local ClickHouse service has no password: `widehouse services up` generates one "
                "for the state dir, or set WIDEHOUSE_CLICKHOUSE_PASSWORD"
            )
        return (
            sys.executable,
            "-m",
            "widehouse.clickhouse.server",
            "--data-dir",
            str(self.dir / "data"),
            "--port",
            str(self.local.clickhouse_port),
            "--user",
            self.local.clickhouse_user,
            "--handles",
            str(self.local.clickhouse_handles),
            f"--tag={self.marker}",  # one word: the marker itself starts with a dash
        )

    def environment(self) -> dict[str, str]:
        # the password goes to the child's environment, never onto its command line
        password = self.local.clickhouse_password
        return {} if password is None else {"WIDEHOUSE_CLICKHOUSE_PASSWORD": password}

    def probe(self) -> str | None:
        """A real authenticated query: ``SELECT 1`` over HTTP."""
        url = f"http://127.0.0.1:{self.local.clickhouse_port}/?query=SELECT%201"
        request = urllib.request.Request(
            url,
            headers={
                "X-ClickHouse-User": self.local.clickhouse_user,
                "X-ClickHouse-Key": self.local.clickhouse_password or "",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 - loopback URL we built
                body = reply.read().decode().strip()
        except (urllib.error.URLError, OSError) as exc:
            return f"no answer on 127.0.0.1:{self.local.clickhouse_port}: {exc}"
        return None if body == "1" else f"SELECT 1 returned {body!r}"
