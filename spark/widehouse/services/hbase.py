"""Apache HBase 2.6 standalone and its Thrift (v1) server, from jars Maven resolved.

Standalone mode runs the master, one region server and ZooKeeper in one JVM (``HMaster start``
with ``hbase.cluster.distributed=false``), storing data under the service directory on the local
file system. The Thrift server is a second JVM in the mode happybase speaks by default (thread
pool server, buffered transport, binary protocol), with its idle timeouts raised so long-lived
connections from batch jobs are not cut.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from xml.sax.saxutils import escape

from widehouse.services.base import JDK17_OPENS, LocalService, java_bin, require_dir
from widehouse.services.process import PortSpec, log4j2_console, port_is_open
from widehouse.settings import LocalServicesSettings

_LOG4J2 = log4j2_console(
    {
        "org.apache.zookeeper": "WARN",
        "org.apache.hadoop": "WARN",
        "org.apache.hadoop.hbase": "INFO",
        "http.requests": "WARN",
        "org.apache.hbase.thirdparty.org.eclipse.jetty": "WARN",
    }
)

MISSING_BEAN_GRACE_S = 3.0
"""How long the master probe keeps asking when the master's Server bean is missing (see probe)."""


def hbase_site(local: LocalServicesSettings, data_dir: Path) -> dict[str, str]:
    """hbase-site.xml properties shared by the HBase JVM and the Thrift JVM."""
    return {
        "hbase.cluster.distributed": "false",
        "hbase.rootdir": (data_dir / "root").as_uri(),
        "hbase.tmp.dir": str(data_dir / "tmp"),
        "hbase.zookeeper.quorum": "127.0.0.1",
        "hbase.zookeeper.property.clientPort": str(local.hbase_zk_port),
        "hbase.zookeeper.property.dataDir": str(data_dir / "zookeeper"),
        # the local file system has no hflush/hsync: let the WAL run on it anyway
        "hbase.unsafe.stream.capability.enforce": "false",
        "hbase.master.hostname": "127.0.0.1",
        "hbase.regionserver.hostname": "127.0.0.1",
        "hbase.master.ipc.address": "127.0.0.1",
        "hbase.regionserver.ipc.address": "127.0.0.1",
        "hbase.master.port": str(local.hbase_master_port),
        "hbase.master.info.port": str(local.hbase_master_info_port),
        "hbase.master.info.bindAddress": "127.0.0.1",
        "hbase.regionserver.port": str(local.hbase_regionserver_port),
        "hbase.regionserver.info.port": "-1",
        # Thrift server: loopback, long idle timeouts
        "hbase.regionserver.thrift.port": str(local.hbase_thrift_port),
        "hbase.thrift.info.port": str(local.hbase_thrift_info_port),
        "hbase.thrift.info.bindAddress": "127.0.0.1",
        "hbase.thrift.server.socket.read.timeout": str(3_600_000),
        "hbase.thrift.connection.max-idletime": str(3_600_000),
        "hbase.thrift.minWorkerThreads": "8",
        # small local footprint
        "hbase.regionserver.handler.count": "10",
        # heap budget (one JVM: master + region server + ZooKeeper; WIDEHOUSE_HBASE_HEAP, 768m): the
        # defaults give memstores 40 % and the block cache 40 %, and let queued RPCs take up to 1 GB,
        # which is how 100k users' writes killed it (OutOfMemoryError). Bound each: memstores 30 %
        # (flushed at 32 MB per region, so 16 salt regions flush early and often), block cache 15 %
        # (the daily jobs scan each row once), queued calls 64 MB (writers wait instead).
        "hbase.regionserver.global.memstore.size": "0.3",
        "hbase.hregion.memstore.flush.size": str(32 << 20),
        "hfile.block.cache.size": "0.15",
        "hbase.ipc.server.max.callqueue.size": str(64 << 20),
        "hbase.master.wait.on.regionservers.mintostart": "1",
    }


def render_site(properties: dict[str, str]) -> str:
    body = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}\n</configuration>\n'


class _HBaseJvm(LocalService):
    """Shared layout: conf dir with hbase-site.xml and log4j2, classpath from the vendor jars."""

    main_class: str
    heap: str

    @property
    def data_dir(self) -> Path:
        # the Thrift server shares the HBase service's data layout (same hbase-site.xml)
        return self.local.state_dir / "services" / "hbase" / "data"

    @property
    def conf_dir(self) -> Path:
        return self.dir / "conf"

    def prepare(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "hbase-site.xml").write_text(render_site(hbase_site(self.local, self.data_dir)))
        (self.conf_dir / "log4j2.properties").write_text(_LOG4J2)
        for sub in ("root", "tmp", "zookeeper"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)

    def args(self) -> tuple[str, ...]:
        return ("start",)

    def command(self) -> tuple[str, ...]:
        lib = require_dir(self.local.vendor_dir / "hbase" / "lib", "the HBase jars")
        return (
            java_bin(self.local),
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=100",
            *JDK17_OPENS,
            self.marker,
            f"-Djava.io.tmpdir={self.dir / 'tmp'}",
            f"-Dlog4j2.configurationFile={self.conf_dir / 'log4j2.properties'}",
            "-Dzookeeper.4lw.commands.whitelist=ruok,stat",
            "-cp",
            f"{self.conf_dir}:{lib}/*",
            self.main_class,
            *self.args(),
        )


class HBaseStandalone(_HBaseJvm):
    name = "hbase"
    main_class = "org.apache.hadoop.hbase.master.HMaster"

    def __init__(self, local: LocalServicesSettings) -> None:
        self.heap = local.hbase_heap
        super().__init__(local)

    def ports(self) -> tuple[PortSpec, ...]:
        local = self.local
        return (
            PortSpec("zookeeper", local.hbase_zk_port, "WIDEHOUSE_HBASE_ZK_PORT"),
            PortSpec("master", local.hbase_master_port, "WIDEHOUSE_HBASE_MASTER_PORT"),
            PortSpec("master web", local.hbase_master_info_port, "WIDEHOUSE_HBASE_MASTER_INFO_PORT"),
            PortSpec("region server", local.hbase_regionserver_port, "WIDEHOUSE_HBASE_REGIONSERVER_PORT"),
        )

    def probe(self) -> str | None:
        url = (
            f"http://127.0.0.1:{self.local.hbase_master_info_port}"
            "/jmx?qry=Hadoop:service=HBase,name=Master,sub=Server"
        )
        # HBase's JMXCacheBuster unregisters and re-registers every metrics bean a few seconds after
        # new metrics sources appear (the first tables and regions of a fresh master), so a running
        # master can briefly publish no Server bean: ask again before calling it unhealthy.
        deadline = time.monotonic() + MISSING_BEAN_GRACE_S
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    beans = json.loads(response.read()).get("beans", [])
            except (OSError, ValueError) as exc:
                return f"master web not answering: {exc}"
            if beans or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if not beans:
            return "master metrics not published yet"
        bean = beans[0]
        if str(bean.get("tag.isActiveMaster", "false")).lower() != "true":
            return "master not active yet"
        if int(bean.get("numRegionServers", 0)) < 1:
            return "no region server has reported in yet"
        return None


class HBaseThrift(_HBaseJvm):
    name = "hbase-thrift"
    depends_on = ("hbase",)
    main_class = "org.apache.hadoop.hbase.thrift.ThriftServer"

    def __init__(self, local: LocalServicesSettings) -> None:
        self.heap = local.hbase_thrift_heap
        super().__init__(local)

    def args(self) -> tuple[str, ...]:
        local = self.local
        # -threadpool + buffered transport + binary protocol: what happybase speaks by default
        return (
            "-threadpool",
            "-b", "127.0.0.1",
            "-p", str(local.hbase_thrift_port),
            "--infoport", str(local.hbase_thrift_info_port),
            "start",
        )  # fmt: skip

    def ports(self) -> tuple[PortSpec, ...]:
        local = self.local
        return (
            PortSpec("thrift", local.hbase_thrift_port, "WIDEHOUSE_HBASE_THRIFT_PORT"),
            PortSpec("thrift web", local.hbase_thrift_info_port, "WIDEHOUSE_HBASE_THRIFT_INFO_PORT"),
        )

    def probe(self) -> str | None:
        if not port_is_open(self.local.hbase_thrift_port):
            return "thrift port not open yet"
        # a real round trip through Thrift -> master -> region server serving hbase:meta
        import happybase

        connection = happybase.Connection(
            "127.0.0.1", self.local.hbase_thrift_port, timeout=10_000, autoconnect=False
        )
        try:
            connection.open()
            connection.tables()
            next(iter(connection.table("hbase:meta").scan(limit=1)), None)
        finally:
            connection.close()
        return None
