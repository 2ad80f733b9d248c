"""Apache Pulsar 4.0 standalone on loopback, from the server distribution Maven resolved.

Configuration is rendered from the distribution's own ``conf/standalone.conf`` with Widehouse's
overrides (so a Pulsar upgrade keeps its new defaults) into the service directory. Metadata lives in
RocksDB (the standalone default, no ZooKeeper), one bookie with quorums of 1, no functions worker, no
stream storage, no WebSocket; topics are never deleted for inactivity and topic stats refresh every
5 seconds so the planner sees live traffic.

With ``WIDEHOUSE_PULSAR_AUTH=token`` the broker enforces token authentication and authorization:
an HS256 secret key and the superuser token (role ``widehouse-admin``, also the broker's own
internal client's) are generated under ``<state>/secrets`` (0600), and every other role is only what
an admin grants it (:func:`widehouse.pulsar.tokens.issue_token` makes its token). The broker checks
connected clients' tokens for expiry every few seconds (``authenticationRefreshCheckSeconds``), so a
token that expires while a stream runs ends its connections soon after, not a minute later.

The broker logs to the console, which the service manager appends to the service's log file (Pulsar's
own rolling file is not used): :data:`LOG4J2` keeps the loggers that write a line per admin request
or per reader opened and closed at WARN. At INFO they wrote 2.9 GB in twelve hours of benchmarks,
and would write on the order of 1 GB a day under a live stream (estimated from the lines per batch).
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from widehouse.errors import SetupError
from widehouse.jvm import JIT_OPTIONS, common_pool_option
from widehouse.pulsar import tokens
from widehouse.services.base import LocalService, java_bin, require_dir
from widehouse.services.disk import bookie_threshold, disk_use, full_disk_reason
from widehouse.services.process import PortSpec, log4j2_console, port_is_open


def pulsar_overrides(broker_port: int, web_port: int) -> dict[str, str]:
    """standalone.conf keys Widehouse sets; everything else keeps the distribution default."""
    return {
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        "bindAddresses": "",
        # the embedded bookie reads this file too: keep it on loopback
        "listeningInterface": "lo",
        "brokerServicePort": str(broker_port),
        "webServicePort": str(web_port),
        "clusterName": "standalone",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "statsUpdateInitialDelayInSecs": "5",
        "statsUpdateFrequencyInSecs": "5",
        "webSocketServiceEnabled": "false",
        "functionsWorkerEnabled": "false",
        "managedLedgerDefaultEnsembleSize": "1",
        "managedLedgerDefaultWriteQuorum": "1",
        "managedLedgerDefaultAckQuorum": "1",
        # a per-partition message index on every entry: lets readers count messages between offsets
        "brokerEntryMetadataInterceptors": (
            "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"
        ),
        "exposingBrokerEntryMetadataToClientEnabled": "true",
        # local single-node durability: the OS page cache is enough and keeps the 2-core box responsive
        "journalSyncData": "false",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
    }


AUTH_REFRESH_CHECK_SECONDS = 5


def token_auth_overrides(secret_key: Path, admin_token: Path) -> dict[str, str]:
    """standalone.conf keys of token authentication + authorization (Pulsar 4.0 "JWT" docs)."""
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": secret_key.as_uri(),  # file:///...: the raw key bytes
        "authorizationEnabled": "true",
        "superUserRoles": tokens.ADMIN_ROLE,
        "authenticationRefreshCheckSeconds": str(AUTH_REFRESH_CHECK_SECONDS),
        # the broker's own client (standalone's namespace setup, replication, topic lookups)
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": admin_token.as_uri(),  # file:///...: read at use
    }


def render_conf(template: str, overrides: dict[str, str]) -> str:
    """Set ``key=value`` lines in a Java properties file, appending keys the template lacks."""
    remaining = dict(overrides)
    out: list[str] = []
    for line in template.splitlines():
        match = re.match(r"^([A-Za-z0-9_.]+)=", line)
        if match and match.group(1) in remaining:
            key = match.group(1)
            out.append(f"{key}={remaining.pop(key)}")
        else:
            out.append(line)
    if remaining:
        out.append("")
        out.append("# --- added by widehouse ---")
        out.extend(f"{k}={v}" for k, v in remaining.items())
    return "\n".join(out) + "\n"


LOG4J2 = log4j2_console(
    {
        "org.eclipse.jetty.server.RequestLog": "WARN",  # one line per admin request
        # a few lines per reader or consumer opened and closed, per subscription and cursor
        "org.apache.pulsar.broker.service.ServerCnx": "WARN",
        "org.apache.pulsar.broker.service.Consumer": "WARN",
        "org.apache.pulsar.broker.service.AbstractDispatcherSingleActiveConsumer": "WARN",
        "org.apache.pulsar.broker.service.persistent.PersistentSubscription": "WARN",
        "org.apache.pulsar.broker.service.persistent.PersistentTopic": "WARN",
        "org.apache.pulsar.broker.admin.impl.PersistentTopicsBase": "WARN",
        "org.apache.pulsar.broker.web.PulsarWebResource": "WARN",
        "org.apache.bookkeeper.mledger.impl": "WARN",
        "org.apache.bookkeeper.client.LedgerCreateOp": "WARN",
        "org.apache.pulsar.metadata.impl.AbstractMetadataStore": "WARN",
    }
)
"""The broker's log configuration: INFO to the console, the per-request and per-reader loggers at WARN."""


class PulsarStandalone(LocalService):
    name = "pulsar"

    @property
    def home(self) -> Path:
        base = require_dir(self.local.vendor_dir / "pulsar", "the Pulsar distribution")
        homes = sorted(p for p in base.glob("apache-pulsar-*") if (p / "bin" / "pulsar").is_file())
        if not homes:
            raise SetupError(f"no apache-pulsar-* distribution under {base}; run `make setup`")
        return homes[-1]

    @property
    def conf_file(self) -> Path:
        return self.dir / "conf" / "standalone.conf"

    @property
    def log_conf(self) -> Path:
        return self.dir / "conf" / "log4j2.properties"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.local.pulsar_web_port}"

    @property
    def secured(self) -> bool:
        """Token authentication and authorization on (``WIDEHOUSE_PULSAR_AUTH=token``)."""
        return self.local.pulsar_auth == "token"

    def ports(self) -> tuple[PortSpec, ...]:
        return (
            PortSpec("broker", self.local.pulsar_broker_port, "WIDEHOUSE_PULSAR_BROKER_PORT"),
            PortSpec("web/admin", self.local.pulsar_web_port, "WIDEHOUSE_PULSAR_WEB_PORT"),
        )

    def prepare(self) -> None:
        template = (self.home / "conf" / "standalone.conf").read_text()
        self.conf_file.parent.mkdir(parents=True, exist_ok=True)
        overrides = pulsar_overrides(self.local.pulsar_broker_port, self.local.pulsar_web_port)
        if self.secured:
            state = self.local.state_dir
            tokens.ensure_admin_token(state)  # makes the key too
            overrides |= token_auth_overrides(tokens.secret_key_path(state), tokens.admin_token_path(state))
        self.conf_file.write_text(render_conf(template, overrides))
        self.log_conf.write_text(LOG4J2)
        for sub in ("data", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)

    def environment(self) -> dict[str, str]:
        local = self.local
        env = {
            "PULSAR_STANDALONE_CONF": str(self.conf_file),
            "PULSAR_LOG_CONF": str(self.log_conf),
            "PULSAR_LOG_DIR": str(self.dir / "logs"),
            "PULSAR_MEM": (
                f"-Xms128m -Xmx{local.pulsar_heap} -XX:MaxDirectMemorySize={local.pulsar_direct_memory}"
            ),
            "PULSAR_GC": "-XX:+UseG1GC -XX:MaxGCPauseMillis=50 -XX:+PerfDisableSharedMem",
            "PULSAR_GC_LOG": " ",
            "PULSAR_EXTRA_OPTS": " ".join(
                [
                    self.marker,
                    "-Dpulsar.allocator.exit_on_oom=true",
                    f"-Djava.io.tmpdir={self.dir / 'tmp'}",
                    *JIT_OPTIONS[local.pulsar_jit].split(),
                    common_pool_option(),
                ]
            ),
        }
        if local.java_home:
            env["JAVA_HOME"] = local.java_home
        return env

    def full_disk(self) -> str | None:
        """Why the bookie would take no writes on the disk of its ledgers, or None (:mod:`.disk`)."""
        try:
            threshold = bookie_threshold((self.home / "conf" / "standalone.conf").read_text())
        except (OSError, SetupError):
            return None  # no distribution here (command() says so), or a broker run elsewhere
        return full_disk_reason(disk_use(self.dir / "data" / "bookkeeper"), threshold)

    def command(self) -> tuple[str, ...]:
        java_bin(self.local)  # fail early with a clear message when no suitable JDK is present
        full = self.full_disk()
        if full is not None:
            raise SetupError(f"pulsar cannot start: {full}")
        data = self.dir / "data"
        return (
            str(self.home / "bin" / "pulsar"),
            "standalone",
            "--no-functions-worker",
            "--no-stream-storage",
            "--bookkeeper-dir",
            str(data / "bookkeeper"),
            "--metadata-dir",
            str(data / "metadata"),
        )

    def probe(self) -> str | None:
        if not port_is_open(self.local.pulsar_broker_port):
            return "broker port not open yet"
        full = self.full_disk()
        if full is not None:
            return full  # the admin API still answers, but nothing can be published
        url = f"{self.admin_url}/admin/v2/namespaces/public"
        request = urllib.request.Request(url)  # noqa: S310 - loopback http
        if self.secured:
            token = tokens.ensure_admin_token(self.local.state_dir)
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback http
                namespaces = json.loads(response.read())
        except OSError as exc:
            return f"admin REST not answering: {exc}"
        if "public/default" not in namespaces:
            return "namespace public/default not created yet"
        return None
