"""Rendering of the local services' configuration files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from widehouse.jvm import common_pool_option
from widehouse.services.hbase import HBaseThrift, hbase_site, render_site
from widehouse.services.metastore import HiveMetastore
from widehouse.services.pulsar import PulsarStandalone, pulsar_overrides, render_conf
from widehouse.settings import LocalServicesSettings, load_settings


def test_render_conf_overrides_existing_keys_and_appends_missing() -> None:
    template = "# comment\nbindAddress=0.0.0.0\nwebServicePort=8080\nkeepMe=1\n"
    out = render_conf(template, {"bindAddress": "127.0.0.1", "webServicePort": "8090", "newKey": "x"})
    lines = out.splitlines()
    assert "bindAddress=127.0.0.1" in lines
    assert "webServicePort=8090" in lines
    assert "keepMe=1" in lines
    assert "# comment" in lines
    assert lines[-1] == "newKey=x"
    assert "bindAddress=0.0.0.0" not in lines


def test_pulsar_overrides_are_loopback_and_keep_topics() -> None:
    o = pulsar_overrides(6650, 8090)
    assert o["bindAddress"] == "127.0.0.1"
    assert o["advertisedAddress"] == "127.0.0.1"
    assert o["listeningInterface"] == "lo"
    assert o["brokerDeleteInactiveTopicsEnabled"] == "false"
    assert int(o["statsUpdateFrequencyInSecs"]) <= 10
    assert o["webSocketServiceEnabled"] == "false"
    assert o["functionsWorkerEnabled"] == "false"
    assert {
        o[k]
        for k in (
            "managedLedgerDefaultEnsembleSize",
            "managedLedgerDefaultWriteQuorum",
            "managedLedgerDefaultAckQuorum",
        )
    } == {"1"}


def test_pulsar_command_runs_standalone_without_functions_or_stream_storage(tmp_path: Path) -> None:
    home = tmp_path / "vendor" / "pulsar" / "apache-pulsar-4.0.8"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "pulsar").write_text("#!/bin/sh\n")
    local = LocalServicesSettings(
        state_dir=tmp_path / "state", vendor_dir=tmp_path / "vendor", pulsar_heap="384m"
    )
    service = PulsarStandalone(local)
    argv = service.command()
    assert argv[:4] == (
        str(home / "bin" / "pulsar"),
        "standalone",
        "--no-functions-worker",
        "--no-stream-storage",
    )
    env = service.environment()
    assert "-Xmx384m" in env["PULSAR_MEM"]
    assert service.marker in env["PULSAR_EXTRA_OPTS"]
    assert env["PULSAR_STANDALONE_CONF"].startswith(str(tmp_path / "state"))
    assert env["PULSAR_LOG_CONF"] == str(tmp_path / "state/services/pulsar/conf/log4j2.properties")


def test_pulsar_log_config_is_written_with_the_chatty_loggers_quiet(tmp_path: Path) -> None:
    """The broker's console log (appended to the service's log file, never rotated) keeps INFO but
    not a line per admin request or per reader opened and closed."""
    home = tmp_path / "vendor" / "pulsar" / "apache-pulsar-4.0.8"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "pulsar").write_text("#!/bin/sh\n")
    (home / "conf").mkdir()
    (home / "conf" / "standalone.conf").write_text("bindAddress=0.0.0.0\n")
    local = LocalServicesSettings(state_dir=tmp_path / "state", vendor_dir=tmp_path / "vendor")
    service = PulsarStandalone(local)
    service.prepare()
    props = dict(
        line.split(" = ", 1)
        for line in Path(service.environment()["PULSAR_LOG_CONF"]).read_text().splitlines()
    )
    assert props["rootLogger"] == "INFO, console"
    assert props["appender.console.target"] == "SYSTEM_OUT"
    levels = {
        name: props[key.removesuffix(".name") + ".level"]
        for key, name in props.items()
        if key.startswith("logger.") and key.endswith(".name")
    }
    for chatty in (
        "org.eclipse.jetty.server.RequestLog",
        "org.apache.pulsar.broker.service.ServerCnx",
        "org.apache.pulsar.broker.service.Consumer",
        "org.apache.bookkeeper.mledger.impl",
    ):
        assert levels[chatty] == "WARN"


def test_hbase_site_is_standalone_on_loopback(tmp_path: Path) -> None:
    local = LocalServicesSettings(state_dir=tmp_path, vendor_dir=tmp_path, hbase_zk_port=2182)
    xml = render_site(hbase_site(local, tmp_path / "data"))
    props = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(xml).iter("property")}
    assert props["hbase.cluster.distributed"] == "false"
    assert props["hbase.rootdir"] == (tmp_path / "data" / "root").as_uri()
    assert props["hbase.zookeeper.property.clientPort"] == "2182"
    assert props["hbase.master.ipc.address"] == "127.0.0.1"
    assert props["hbase.thrift.info.bindAddress"] == "127.0.0.1"
    assert int(props["hbase.thrift.server.socket.read.timeout"]) >= 600_000


def test_thrift_server_speaks_happybase_default_mode(tmp_path: Path) -> None:
    (tmp_path / "vendor" / "hbase" / "lib").mkdir(parents=True)
    local = LocalServicesSettings(
        state_dir=tmp_path / "s", vendor_dir=tmp_path / "vendor", hbase_thrift_port=9999
    )
    argv = HBaseThrift(local).command()
    tail = argv[argv.index("org.apache.hadoop.hbase.thrift.ThriftServer") + 1 :]
    # thread pool server with buffered transport and binary protocol: no -f (framed), no -c (compact)
    assert tail[0] == "-threadpool"
    assert "-f" not in tail and "-c" not in tail
    assert tail[tail.index("-p") + 1] == "9999"
    assert tail[tail.index("-b") + 1] == "127.0.0.1"


def test_metastore_owns_its_derby_database_and_shares_the_sessions_warehouse(tmp_path: Path) -> None:
    local = LocalServicesSettings(
        state_dir=tmp_path / "state",
        vendor_dir=tmp_path / "vendor",
        hive_metastore_port=19083,
        hive_metastore_heap="192m",
        hive_warehouse_dir=str(tmp_path / "lake" / "warehouse"),
    )
    service = HiveMetastore(local)
    service.prepare()
    site = {
        p.findtext("name"): p.findtext("value")
        for p in ET.parse(service.dir / "conf" / "hive-site.xml").getroot().iter("property")
    }
    derby = tmp_path / "state" / "services" / "metastore" / "data" / "metastore_db"
    assert site["javax.jdo.option.ConnectionURL"] == f"jdbc:derby:;databaseName={derby};create=true"
    assert site["hive.metastore.warehouse.dir"] == f"file://{tmp_path}/lake/warehouse"
    assert (tmp_path / "lake" / "warehouse").is_dir()
    argv = service.command()
    jars = Path(argv[argv.index("-cp") + 1].split(":")[1].removesuffix("/*"))
    assert list(jars.glob("hive-metastore-2.3.*.jar"))  # pyspark's own Hive: Spark's client version
    assert argv[-3:] == ("org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", "19083")
    assert "-Xmx192m" in argv
    assert service.endpoints() == ["thrift://127.0.0.1:19083"]
    # a hand-built config without a warehouse gets the documented default
    bare = HiveMetastore(LocalServicesSettings(state_dir=tmp_path / "s2", vendor_dir=tmp_path / "v"))
    assert bare.warehouse_dir == str(tmp_path / "s2" / "hive" / "warehouse")


@pytest.mark.parametrize(
    ("profile", "options"),
    [
        (None, ["-XX:TieredStopAtLevel=1"]),  # the default: C1 only
        ("c1", ["-XX:TieredStopAtLevel=1"]),
        (
            "late-c2",
            [
                "-XX:Tier4InvocationThreshold=50000",
                "-XX:Tier4MinInvocationThreshold=6000",
                "-XX:Tier4CompileThreshold=150000",
                "-XX:Tier4BackEdgeThreshold=400000",
            ],
        ),
        ("tiered", []),
    ],
)
def test_the_broker_jvm_compiles_as_the_setting_says(
    tmp_path: Path, profile: str | None, options: list[str]
) -> None:
    home = tmp_path / "vendor" / "pulsar" / "apache-pulsar-4.0.8"
    (home / "bin").mkdir(parents=True)
    env = {"WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), "WIDEHOUSE_VENDOR_DIR": str(tmp_path / "vendor")}
    if profile is not None:
        env["WIDEHOUSE_PULSAR_JIT"] = profile
    service = PulsarStandalone(load_settings(env).local)
    extra = service.environment()["PULSAR_EXTRA_OPTS"].split()
    assert [o for o in extra if o.startswith(("-XX:Tier", "-XX:-Tiered"))] == options
    assert extra[0] == service.marker  # the service manager finds its process by it
    assert "-Dpulsar.allocator.exit_on_oom=true" in extra
    assert common_pool_option() in extra


@pytest.mark.parametrize(("cores", "threads"), [(1, 2), (2, 2), (3, 2), (8, 7)])
def test_the_brokers_common_pool_has_at_least_two_threads(cores: int, threads: int) -> None:
    """With one thread (the JDK's size on two cores), each ``CompletableFuture`` ``*Async`` call
    given no executor starts a thread of its own; more cores keep the JDK's size (cores - 1)."""
    assert common_pool_option(cores) == f"-Djava.util.concurrent.ForkJoinPool.common.parallelism={threads}"
