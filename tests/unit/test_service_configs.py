"""Rendering of the local services' configuration files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from widehouse.services.hbase import HBaseThrift, hbase_site, render_site
from widehouse.services.pulsar import PulsarStandalone, pulsar_overrides, render_conf
from widehouse.settings import LocalServicesSettings


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
