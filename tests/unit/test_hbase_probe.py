"""The HBase master's health probe reads the master's JMX Server bean (a stand-in web server here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from widehouse.services import hbase
from widehouse.services.hbase import HBaseStandalone
from widehouse.settings import LocalServicesSettings

ACTIVE = {"tag.isActiveMaster": "true", "numRegionServers": 1}


class JmxServer:
    """Answers /jmx with the queued bean lists in turn, then the last one forever."""

    def __init__(self, answers: list[list[dict[str, object]]]) -> None:
        self.answers = answers
        self.asked = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                beans = server.answers[min(server.asked, len(server.answers) - 1)]
                server.asked += 1
                body = json.dumps({"beans": beans}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.http.server_address[1])
        threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def jmx() -> Iterator[list[JmxServer]]:
    servers: list[JmxServer] = []
    yield servers
    for server in servers:
        server.http.shutdown()
        server.http.server_close()


def master(tmp_path: Path, jmx: list[JmxServer], answers: list[list[dict[str, object]]]) -> HBaseStandalone:
    server = JmxServer(answers)
    jmx.append(server)
    local = LocalServicesSettings(state_dir=tmp_path, vendor_dir=tmp_path, hbase_master_info_port=server.port)
    return HBaseStandalone(local)


def test_a_bean_missing_for_a_moment_is_asked_again(tmp_path: Path, jmx: list[JmxServer]) -> None:
    # HBase's JMXCacheBuster drops every bean for ~0.5 s while it restarts the metrics system
    service = master(tmp_path, jmx, [[], [], [ACTIVE]])
    assert service.probe() is None
    assert jmx[0].asked == 3


def test_a_bean_that_stays_missing_is_reported(
    tmp_path: Path, jmx: list[JmxServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hbase, "MISSING_BEAN_GRACE_S", 0.3)
    service = master(tmp_path, jmx, [[]])
    assert service.probe() == "master metrics not published yet"
    assert jmx[0].asked >= 2


def test_a_master_without_region_servers_is_unhealthy_at_once(tmp_path: Path, jmx: list[JmxServer]) -> None:
    service = master(tmp_path, jmx, [[{"tag.isActiveMaster": "true", "numRegionServers": 0}]])
    assert service.probe() == "no region server has reported in yet"
    assert jmx[0].asked == 1
