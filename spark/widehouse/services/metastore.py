"""The shared Hive metastore: a real metastore server on loopback, from pyspark's own Hive jars.

Spark's built-in Hive client is Hive 2.3 (pyspark ships ``hive-metastore-2.3.x.jar`` with Derby,
DataNucleus and the shaded Hadoop client in ``pyspark/jars``); this service runs that same version's
``org.apache.hadoop.hive.metastore.HiveMetaStore`` with those jars, so no extra download is needed
and the server always matches the client. The metastore owns a Derby database under
``<state>/services/metastore/data`` (only this JVM opens it); every Spark process (streams,
finalize, the daily merge, analysts, tests) talks to it over Thrift at
``WIDEHOUSE_HIVE_METASTORE_URI`` (by default ``thrift://127.0.0.1:<WIDEHOUSE_HIVE_METASTORE_PORT>``),
so they share one catalog at once, which the in-process Derby metastore cannot do.

The server's ``hive.metastore.warehouse.dir`` is ``WIDEHOUSE_HIVE_WAREHOUSE``, the same value every
Widehouse Spark session sets as ``spark.sql.warehouse.dir``: the ``default`` database (created by
the server) and databases Spark creates land in the same tree.

Hive 2.3's server has no bind-address setting: it listens on every interface (``0.0.0.0``), with
no authentication. Clients are pointed at 127.0.0.1; on a shared or exposed host, firewall the
port (or run a Hive 3+ metastore, which has ``metastore.thrift.bind.host``).

The health probe is a real Thrift call (``get_all_databases``, binary protocol, buffered
transport: what the metastore speaks without SASL) that must list ``default``.
"""

from __future__ import annotations

import importlib.util
import socket
import struct
from pathlib import Path

from widehouse.errors import SetupError
from widehouse.jvm import JIT_OPTIONS
from widehouse.private import private_dir
from widehouse.services.base import LocalService, java_bin
from widehouse.services.hbase import render_site
from widehouse.services.process import PortSpec, log4j2_console

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"

_LOG4J2 = log4j2_console(
    {
        "DataNucleus": "WARN",
        "org.datanucleus": "WARN",
        "org.apache.hadoop": "WARN",
        "org.apache.hadoop.hive.metastore": "INFO",
        "org.apache.hadoop.hive.metastore.HiveMetaStore.audit": "WARN",
    }
)


def pyspark_jars_dir() -> Path:
    """``pyspark/jars`` of the installed pyspark (located without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError("pyspark is not installed in this Python; run `make setup`")
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if any(jars.glob("hive-metastore-*.jar")):
            return jars
    raise SetupError(
        f"no hive-metastore-*.jar under {', '.join(spec.submodule_search_locations)}/jars: this pyspark "
        "has no built-in Hive client; install the pyspark in requirements.txt (`make setup`)"
    )


def warehouse_uri(warehouse_dir: str) -> str:
    """The warehouse as the metastore stores it: a ``file:`` URI for a local path, else unchanged."""
    return Path(warehouse_dir).as_uri() if warehouse_dir.startswith("/") else warehouse_dir


def metastore_site(data_dir: Path, tmp_dir: Path, warehouse_dir: str) -> dict[str, str]:
    """hive-site.xml of the metastore server: Derby under ``data_dir``, schema created on first start."""
    return {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={data_dir / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        # a fresh Derby database gets Hive 2.3's schema on first start; no schemaTool step
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "datanucleus.connectionPoolingType": "DBCP",  # BoneCP (Hive's default) is not in pyspark/jars
        "hive.metastore.warehouse.dir": warehouse_uri(warehouse_dir),
        # Hive's default async logging needs the LMAX disruptor, which pyspark does not ship
        "hive.async.log.enabled": "false",
        # a few Thrift workers are plenty on loopback (Hive's default minimum is 200 threads)
        "hive.metastore.server.min.threads": "4",
        "hive.metastore.server.max.threads": "200",
        # scratch dirs Hive may touch: under the service dir, not /tmp/<user>
        "hive.exec.scratchdir": str(tmp_dir / "scratch"),
        "hive.exec.local.scratchdir": str(tmp_dir / "local"),
        "hive.downloaded.resources.dir": str(tmp_dir / "resources"),
        "hive.querylog.location": str(tmp_dir / "querylog"),
    }


class HiveMetastore(LocalService):
    """``widehouse services up metastore``: the Hive 2.3 metastore server over its own Derby database."""

    name = "metastore"

    @property
    def conf_dir(self) -> Path:
        return self.dir / "conf"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def warehouse_dir(self) -> str:
        return self.local.hive_warehouse_dir or str(self.local.state_dir / "hive" / "warehouse")

    @property
    def uri(self) -> str:
        return self.local.hive_metastore_uri

    def ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("thrift", self.local.hive_metastore_port, "WIDEHOUSE_HIVE_METASTORE_PORT"),)

    def endpoints(self) -> list[str]:
        return [self.uri]

    def prepare(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        site = metastore_site(self.data_dir, tmp, self.warehouse_dir)
        (self.conf_dir / "hive-site.xml").write_text(render_site(site))
        # Hive's LogUtils looks for hive-log4j2.properties on the classpath (conf dir first)
        (self.conf_dir / "hive-log4j2.properties").write_text(_LOG4J2)
        if self.warehouse_dir.startswith("/"):  # as the sessions create it: this user's only
            private_dir(Path(self.warehouse_dir))

    def command(self) -> tuple[str, ...]:
        jars = pyspark_jars_dir()
        return (
            java_bin(self.local),
            f"-Xmx{self.local.hive_metastore_heap}",
            "-XX:+UseSerialGC",
            *JIT_OPTIONS["c1"].split(),  # starts in seconds; a catalog server needs no C2 peak speed
            self.marker,
            f"-Djava.io.tmpdir={self.dir / 'tmp'}",
            f"-Dderby.system.home={self.data_dir}",
            "-Dderby.stream.error.file=" + str(self.dir / "logs" / "derby.log"),
            "-cp",
            f"{self.conf_dir}:{jars}/*",
            MAIN_CLASS,
            "-p",
            str(self.local.hive_metastore_port),
        )

    def probe(self) -> str | None:
        # no bare connect first: the server logs a stack trace for every connection closed unused
        try:
            databases = list_databases("127.0.0.1", self.local.hive_metastore_port)
        except (OSError, ValueError) as exc:
            return f"no catalog answer from {self.uri}: {exc}"
        if "default" not in databases:
            return f"database default not created yet (databases: {databases})"
        return None


# -- a minimal Thrift client: one call, TBinaryProtocol (strict) over a buffered socket ------------

_VERSION_1 = 0x80010000
_CALL, _REPLY, _EXCEPTION = 1, 2, 3
_T_STOP, _T_STRING, _T_LIST = 0, 11, 15


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def exact(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ValueError("connection closed mid-reply")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def i32(self) -> int:
        return int(struct.unpack(">i", self.exact(4))[0])

    def string(self) -> str:
        return self.exact(self.i32()).decode("utf-8", errors="replace")


def thrift_call(sock: socket.socket, method: str, arguments: bytes = b"") -> _Reader:
    """Send one call (``arguments``: the encoded fields of its argument struct, without the STOP) and
    return a reader at the first field of its result struct; ValueError for anything but a reply."""
    name = method.encode()
    request = struct.pack(">I", _VERSION_1 | _CALL) + struct.pack(">i", len(name)) + name
    sock.sendall(request + struct.pack(">i", 1) + arguments + bytes([_T_STOP]))  # seqid 1
    reader = _Reader(sock)
    header = reader.i32() & 0xFFFFFFFF
    if header & 0xFFFF0000 != _VERSION_1:
        raise ValueError(f"not a Thrift binary-protocol reply (header 0x{header:08x})")
    kind = header & 0xFF
    reader.string()  # method name
    reader.i32()  # seqid
    if kind == _EXCEPTION:
        raise ValueError(f"the metastore answered {method} with a Thrift application exception")
    if kind != _REPLY:
        raise ValueError(f"unexpected Thrift message type {kind}")
    return reader


def list_databases(host: str, port: int, timeout: float = 10.0) -> list[str]:
    """``ThriftHiveMetastore.get_all_databases()`` against a metastore server; raises ValueError on a
    Thrift exception or a malformed reply, OSError when it cannot be reached."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = thrift_call(sock, "get_all_databases")
        field_type = reader.exact(1)[0]
        if field_type == _T_STOP:
            raise ValueError("empty reply")
        field_id = struct.unpack(">h", reader.exact(2))[0]
        if field_id != 0 or field_type != _T_LIST:
            # field 1 is the MetaException the call declares
            raise ValueError(f"the metastore raised (reply field {field_id}, type {field_type})")
        element_type = reader.exact(1)[0]
        if element_type != _T_STRING:
            raise ValueError(f"expected a list of strings, got element type {element_type}")
        return [reader.string() for _ in range(reader.i32())]
