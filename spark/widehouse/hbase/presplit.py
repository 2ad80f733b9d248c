"""Create a day table pre-split on its salt buckets with HBase's ``RegionSplitter``.

Why a JVM tool: HBase's Thrift v1 API (what happybase speaks, and the server Widehouse runs)
creates a table as a single region and has no split call (happybase issues #119, #180, #237); the
Thrift2 API has ``createTable(desc, splitKeys)`` but needs a second server; the REST schema API has
no splits either. ``org.apache.hadoop.hbase.util.RegionSplitter`` ships in hbase-server (the jars
``make setup`` resolves) and is HBase's documented way to pre-split: with ``DecimalStringSplit``
from ``--firstrow 00`` to ``--lastrow 15`` and 16 regions it splits at ``01`` .. ``15``, exactly the
salt prefixes (range = last - first + 1 = 16, one salt per region). It reaches HBase through
ZooKeeper (``WIDEHOUSE_HBASE_ZOOKEEPER``), runs once per table, and takes a few seconds.

On a cluster without the jars, create the table with the HBase shell instead (same result)::

    create 'wh_user_daily', {NAME => 's', VERSIONS => 1}, {NAME => 'h', VERSIONS => 1},
        SPLITS => ['01', '02', ..., '15']
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from widehouse.errors import HBaseError
from widehouse.hbase.keys import salt_text, split_keys

if TYPE_CHECKING:
    from widehouse.settings import Settings

SPLITTER = "org.apache.hadoop.hbase.util.RegionSplitter"


@dataclass(frozen=True)
class PresplitTool:
    java: str
    classpath: str
    zookeeper: str
    """``host:port[,host:port]``."""
    timeout_s: float = 180.0

    @classmethod
    def from_settings(cls, settings: Settings) -> PresplitTool:
        from widehouse.services.base import java_bin

        lib = settings.local.vendor_dir / "hbase" / "lib"
        return cls(java_bin(settings.local), f"{lib}/*", settings.hbase.zookeeper)

    def command(self, name: str, buckets: int, families: tuple[str, ...]) -> list[str]:
        hosts = [h.rpartition(":")[0] for h in self.zookeeper.split(",")]
        port = self.zookeeper.split(",")[0].rpartition(":")[2]
        return [
            self.java,
            "-Xmx256m",
            "-cp",
            self.classpath,
            SPLITTER,
            "-D", f"hbase.zookeeper.quorum={','.join(hosts)}",
            "-D", f"hbase.zookeeper.property.clientPort={port}",
            "-c", str(buckets),
            "-f", ":".join(families),
            "--firstrow", salt_text(0, buckets),
            "--lastrow", salt_text(buckets - 1, buckets),
            name,
            "DecimalStringSplit",
        ]  # fmt: skip

    def create(self, name: str, buckets: int, families: tuple[str, ...]) -> None:
        """Create ``name`` with ``families`` split at :func:`~widehouse.hbase.keys.split_keys`."""
        if not Path(self.classpath.removesuffix("/*")).is_dir():
            raise HBaseError(
                f"cannot pre-split HBase table {name}: no HBase jars at {self.classpath} (run `make setup`), "
                f"or create it in the HBase shell with SPLITS => {[k.decode() for k in split_keys(buckets)]}"
            )
        command = self.command(name, buckets, families)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HBaseError(
                f"creating pre-split HBase table {name} via ZooKeeper {self.zookeeper} failed: {exc}"
            ) from exc
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise HBaseError(
                f"creating pre-split HBase table {name} via ZooKeeper {self.zookeeper} failed "
                f"(RegionSplitter exit {done.returncode}): {tail}"
            )
