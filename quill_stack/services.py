"""One place that knows how to start and health-check each process of the stack.

Every service is a plain foreground process described by a `ServiceSpec`: its
command line, the config files to write first, its log file, its port and its health
check. The supervisor (`quill_stack.supervisor`), the test fixtures (tests/conftest.py)
and the docker-compose parity test (tests/test_compose.py) all build their processes
from the functions here, so a service starts the same way everywhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from broker.zk.security import (
    CLIENT_SECTION_KEY,
    DEFAULT_CLIENT_SECTION,
    JAAS_CONFIG_KEY,
    ZkCredentials,
    read_client_credentials,
)
from quill_stack import health, redis_auth, secure

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
# ZooKeeper's jar names its dependencies in its manifest; these two add log4j output.
ZOOKEEPER_LOG_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")

# zoo.cfg settings shared by every ZooKeeper we start. `ruok,srvr,stat,mntr` are the
# four-letter words our health checks and the console use; the admin server (an HTTP
# server on 8080) is off so it never collides with anything.
#
# Failure detection takes the session timeout plus up to one tick (ZooKeeper expires
# sessions in tick-sized buckets): a 500 ms tick keeps failover within a second of
# zookeeper.session.timeout.ms (Kafka's sample zookeeper.properties has 2000). The
# session bounds are then set explicitly, since they default to 2 and 20 ticks.
ZOOKEEPER_SETTINGS = {
    "tickTime": "500",
    "minSessionTimeout": "1000",
    "maxSessionTimeout": "60000",
    "maxClientCnxns": "0",
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
}
# How the official `zookeeper` image (docker-compose.yml) spells the same settings.
ZOOKEEPER_IMAGE_ENV = {
    "tickTime": "ZOO_TICK_TIME",
    "maxClientCnxns": "ZOO_MAX_CLIENT_CNXNS",
    "admin.enableServer": "ZOO_ADMINSERVER_ENABLED",
    "4lw.commands.whitelist": "ZOO_4LW_COMMANDS_WHITELIST",
    "initLimit": "ZOO_INIT_LIMIT",
    "syncLimit": "ZOO_SYNC_LIMIT",
}


def _zookeeper_image_env(settings: Mapping[str, str]) -> dict[str, str]:
    """The official image's env for our zoo.cfg settings; the ones it has no variable
    for go through ZOO_CFG_EXTRA."""
    env = {ZOOKEEPER_IMAGE_ENV[k]: v for k, v in settings.items() if k in ZOOKEEPER_IMAGE_ENV}
    extra = [
        f"{k}={v}"
        for k, v in settings.items()
        if k in ZOOKEEPER_SETTINGS and k not in ZOOKEEPER_IMAGE_ENV
    ]
    if extra:
        env["ZOO_CFG_EXTRA"] = " ".join(extra)
    return env


ZOOKEEPER_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Target=System.err
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""

# Redis is a cache and a Celery transport here: no persistence.
REDIS_SETTINGS = {"save": '""', "appendonly": "no"}

# Broker settings the stack writes into every server.properties (Kafka's names and
# Kafka's defaults; written out so that `cat server.properties` tells the whole story).
BROKER_DEFAULTS = {
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "zookeeper.session.timeout.ms": "18000",
}

WORKER_NODE = "quill-worker@" + socket.gethostname()


class ConfigError(ValueError):
    """Bad stack configuration (env var or argument); the message says what to fix."""


@dataclass(frozen=True)
class Requirement:
    """A file or command a service needs, and the Debian package that provides it."""

    what: str
    package: str

    def missing(self) -> bool:
        if self.what.startswith("/"):
            return not Path(self.what).exists()
        return shutil.which(self.what) is None


@dataclass
class ServiceSpec:
    """How to run one service as a foreground process."""

    name: str
    kind: str
    argv: list[str]
    log_path: Path
    port: int | None = None
    host: str = "127.0.0.1"
    env: dict[str, str] = field(default_factory=dict)
    # The configuration keys and values as docker-compose.yml sets them: env vars
    # (config_via="env") or command-line flags (config_via="args").
    config: dict[str, str] = field(default_factory=dict)
    config_via: str = "env"
    files: dict[Path, str] = field(default_factory=dict)
    private_files: bool = False  # the files hold secrets (SASL passwords): mode 0600
    dirs: list[Path] = field(default_factory=list)
    pre_start: list[list[str]] = field(default_factory=list)
    # check(since) -> (healthy, detail); `since` is the process's start time.
    check: Callable[[float | None], health.Health] | None = None
    requires: tuple[Requirement, ...] = ()
    group: int = 0  # start order: every service of group n is healthy before n+1 starts
    start_timeout: float = 60.0
    stop_timeout: float = 20.0
    cwd: Path = PROJECT_ROOT

    def healthy(self, since: float | None = None) -> health.Health:
        if self.check is None:
            return True, "running"
        return self.check(since)


def properties_text(props: Mapping[str, str], header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def env_name(key: str) -> str:
    """The QUILL_ env var that overrides a broker property: log.dirs -> QUILL_LOG_DIRS."""
    return "QUILL_" + key.removeprefix("quill.").upper().replace(".", "_")


# ---------------------------------------------------------------- ZooKeeper


def zookeeper_spec(
    state_dir: Path,
    port: int,
    host: str = "127.0.0.1",
    name: str = "zookeeper",
    settings: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    sasl_users: Mapping[str, str] | None = None,
) -> ServiceSpec:
    """ZooKeeper from the Debian package, standalone, with its own zoo.cfg and data dir.
    With ``sasl_users`` (name -> password) it takes SASL DIGEST-MD5 logins of those users
    only and refuses sessions that have not logged in."""
    settings = {**ZOOKEEPER_SETTINGS, **(settings or {})}
    conf_dir = state_dir / name
    zoo_cfg = {
        "dataDir": str(conf_dir / "data"),
        "clientPort": str(port),
        "clientPortAddress": host,
        **settings,
    }
    files = {conf_dir / "log4j.properties": ZOOKEEPER_LOG4J}
    jvm_flags = []
    if sasl_users:
        zoo_cfg.update(secure.ZOOKEEPER_SASL_SETTINGS)
        files[conf_dir / "jaas.conf"] = secure.zookeeper_server_jaas(sasl_users)
        jvm_flags.append(f"-D{JAAS_CONFIG_KEY}={conf_dir / 'jaas.conf'}")
    files[conf_dir / "zoo.cfg"] = properties_text(zoo_cfg, "generated by quill-stack")
    classpath = ":".join([str(conf_dir), ZOOKEEPER_JAR, *ZOOKEEPER_LOG_JARS])
    argv = [
        "java",
        "-Xms32m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        *jvm_flags,
        "-cp",
        classpath,
        "org.apache.zookeeper.server.ZooKeeperServerMain",
        str(conf_dir / "zoo.cfg"),
    ]
    return ServiceSpec(
        name=name,
        kind="zookeeper",
        argv=argv,
        log_path=log_path or state_dir / "logs" / f"{name}.log",
        port=port,
        host=host,
        config=_zookeeper_image_env(settings),
        files=files,
        private_files=bool(sasl_users),  # jaas.conf holds the users' passwords
        dirs=[conf_dir / "data"],
        check=lambda since=None: health.zookeeper(host, port),
        requires=(
            Requirement("java", "openjdk-17-jre-headless"),
            Requirement(ZOOKEEPER_JAR, "zookeeper"),
        ),
        start_timeout=30.0,
    )


@dataclass(frozen=True)
class EnsembleMember:
    """Where one ZooKeeper server of an ensemble listens: clients, followers (peer) and
    leader election (Kafka's docs' zoo.cfg: server.N=host:2888:3888)."""

    host: str
    client_port: int = 2181
    peer_port: int = 2888
    election_port: int = 3888


def zookeeper_ensemble_spec(
    state_dir: Path,
    myid: int,
    members: Mapping[int, EnsembleMember],
    settings: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    sasl_users: Mapping[str, str] | None = None,
) -> ServiceSpec:
    """One server of a ZooKeeper ensemble (`members`: every server by its myid). The
    zoo.cfg gets the server.N lines and the data dir its myid file; the server runs
    ZooKeeper's QuorumPeerMain. ``sasl_users``: every server takes those SASL logins
    only, as the standalone one does (the servers' quorum links stay inside the
    ensemble's hosts and are not authenticated)."""
    name = f"zookeeper-{myid}"
    me = members[myid]
    servers = {
        f"server.{n}": f"{m.host}:{m.peer_port}:{m.election_port}"
        for n, m in sorted(members.items())
    }
    ensemble = {"initLimit": "10", "syncLimit": "5", **(settings or {}), **servers}
    spec = zookeeper_spec(state_dir, me.client_port, me.host, name, ensemble, log_path, sasl_users)
    spec.argv[spec.argv.index("org.apache.zookeeper.server.ZooKeeperServerMain")] = (
        "org.apache.zookeeper.server.quorum.QuorumPeerMain"
    )
    spec.files[state_dir / name / "data" / "myid"] = f"{myid}\n"
    # as the official image (and containers/zookeeper) take the same ensemble
    spec.config["ZOO_MY_ID"] = str(myid)
    spec.config["ZOO_SERVERS"] = " ".join(
        f"{key}={address};{members[int(key.split('.')[1])].client_port}"
        for key, address in servers.items()
    )
    return spec


def ensemble_connect(members: Mapping[int, EnsembleMember], chroot: str = "") -> str:
    """zookeeper.connect for an ensemble: host1:port1,host2:port2,host3:port3[/chroot]."""
    return ",".join(f"{m.host}:{m.client_port}" for _, m in sorted(members.items())) + chroot


def local_ensemble(host: str, zk_port: int, nodes: int) -> dict[int, EnsembleMember]:
    """`nodes` servers on one host: client ports zk_port, zk_port+1, ..., quorum ports
    2888+i and 3888+i."""
    return {
        n: EnsembleMember(host, zk_port + n - 1, 2888 + n - 1, 3888 + n - 1)
        for n in range(1, nodes + 1)
    }


# ---------------------------------------------------------------- Redis


def redis_spec(
    state_dir: Path,
    port: int,
    host: str = "127.0.0.1",
    name: str = "redis",
    log_path: Path | None = None,
    password: str | None = None,
) -> ServiceSpec:
    """redis-server in the foreground with a generated redis.conf, no persistence; with
    ``password``, Redis refuses every command before AUTH (requirepass)."""
    conf_dir = state_dir / name
    conf = {
        "bind": host,
        "port": str(port),
        "daemonize": "no",
        "dir": str(conf_dir),
        "logfile": '""',
        **REDIS_SETTINGS,
    }
    if password:
        conf.update(secure.redis_auth_conf(password))
    text = "# generated by quill-stack\n" + "".join(f"{k} {v}\n" for k, v in conf.items())
    return ServiceSpec(
        name=name,
        kind="redis",
        argv=["redis-server", str(conf_dir / "redis.conf")],
        log_path=log_path or state_dir / "logs" / f"{name}.log",
        port=port,
        host=host,
        config=dict(REDIS_SETTINGS),
        config_via="args",
        files={conf_dir / "redis.conf": text},
        private_files=bool(password),  # redis.conf holds the password
        check=lambda since=None: health.redis(host, port, password=password),
        requires=(Requirement("redis-server", "redis-server"),),
        start_timeout=20.0,
    )


# ---------------------------------------------------------------- brokers


def broker_properties(
    broker_id: int,
    port: int,
    log_dir: Path,
    zk_connect: str,
    n_brokers: int,
    host: str = "127.0.0.1",
    overrides: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """server.properties for one broker, Kafka's key names."""
    replication = str(min(3, max(1, n_brokers)))
    # Clients cannot connect to a wildcard address: advertise the machine's name instead.
    advertised = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    props = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{host}:{port}",
        "advertised.listeners": f"PLAINTEXT://{advertised}:{port}",
        "log.dirs": str(log_dir),
        "zookeeper.connect": zk_connect,
        # Kafka defaults these to 1 and 3; a local stack shows replication across all
        # its brokers, and a one-broker stack could not create the offsets topic with 3.
        "default.replication.factor": replication,
        "offsets.topic.replication.factor": replication,
        **BROKER_DEFAULTS,
    }
    for key, value in (overrides or {}).items():
        if isinstance(value, bool):
            value = str(value).lower()
        props[key] = str(value)
    return props


def _zookeeper_login(props: Mapping[str, str]) -> ZkCredentials | None:
    """The broker's ZooKeeper login (its JAAS file), for the health check's reads."""
    jaas = props.get(JAAS_CONFIG_KEY)
    if not jaas:
        return None
    return read_client_credentials(jaas, props.get(CLIENT_SECTION_KEY) or DEFAULT_CLIENT_SECTION)


def broker_spec(
    state_dir: Path,
    broker_id: int,
    port: int,
    zk_connect: str,
    n_brokers: int,
    host: str = "127.0.0.1",
    overrides: Mapping[str, object] | None = None,
    log_path: Path | None = None,
) -> ServiceSpec:
    """`python -m broker <server.properties>` with its own log.dirs under state_dir."""
    name = f"broker-{broker_id}"
    broker_dir = state_dir / name
    props = broker_properties(
        broker_id, port, broker_dir / "data", zk_connect, n_brokers, host, overrides
    )
    props_path = broker_dir / "server.properties"
    zk_login = _zookeeper_login(props)
    return ServiceSpec(
        name=name,
        kind="broker",
        argv=[PYTHON, "-m", "broker", str(props_path)],
        log_path=log_path or state_dir / "logs" / f"{name}.log",
        port=port,
        host=host,
        env={"PYTHONUNBUFFERED": "1"},
        config={env_name(key): value for key, value in props.items()},
        files={props_path: properties_text(props, f"{name}: generated by quill-stack")},
        dirs=[broker_dir / "data"],
        check=lambda since=None: health.broker(
            host, port, broker_id, zk_connect, since, zk_credentials=zk_login
        ),
        group=1,
    )


# ---------------------------------------------------------------- worker, console


def app_env(state_dir: Path, redis_url: str, zk_connect: str, bootstrap: str) -> dict[str, str]:
    """Settings for the Django/Celery processes (console/settings.py reads these)."""
    return {
        "QUILL_STATE_DIR": str(state_dir),
        "QUILL_REDIS_URL": redis_url,
        "QUILL_ZOOKEEPER_CONNECT": zk_connect,
        "QUILL_BOOTSTRAP_SERVERS": bootstrap,
    }


def _django_spec(name: str, kind: str, argv: list[str], state_dir: Path, settings: dict):
    return ServiceSpec(
        name=name,
        kind=kind,
        argv=argv,
        log_path=state_dir / "logs" / f"{name}.log",
        env={"PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "console.settings", **settings},
        config=dict(settings),
        group=2,
    )


def worker_spec(state_dir: Path, settings: dict[str, str]) -> ServiceSpec:
    """The Celery worker (threads pool: one process, so signals reach every task)."""
    argv = [PYTHON, "-m", "celery", "-A", "workers", "worker", "-n", WORKER_NODE]
    argv += ["-P", "threads", "-c", "4", "--loglevel", "INFO", "--without-mingle"]
    argv += ["--without-gossip", "-B", "-s", str(state_dir / "celerybeat-schedule")]  # beat: alerts
    spec = _django_spec("worker", "worker", argv, state_dir, settings)
    redis_url = redis_auth.redis_url_from_env(settings)
    spec.check = lambda since=None: health.celery_worker(redis_url, WORKER_NODE)
    return spec


def console_spec(
    state_dir: Path,
    settings: dict[str, str],
    port: int,
    host: str = "127.0.0.1",
    tls_pem: Path | None = None,
    ca: Path | None = None,
) -> ServiceSpec:
    """The Django console under daphne (ASGI: HTTP and websockets). With `tls_pem` (its
    key, certificate and the CA's, from quill_stack.tls) it speaks HTTPS only: Twisted's
    ssl endpoint, Secure cookies and HSTS (QUILL_CONSOLE_TLS), checked against `ca`."""
    app = "console.asgi:application"
    if tls_pem is None:
        argv = [PYTHON, "-m", "daphne", "-b", host, "-p", str(port), app]
    else:
        pem = _endpoint_escape(str(tls_pem))
        where = f"ssl:port={port}:interface={_endpoint_escape(host)}"
        argv = [PYTHON, "-m", "daphne", "-e", f"{where}:privateKey={pem}:certKey={pem}", app]
        settings = {**settings, "QUILL_CONSOLE_TLS": "1"}
    spec = _django_spec("console", "console", argv, state_dir, settings)
    spec.port, spec.host = port, host
    spec.pre_start = [[PYTHON, "manage.py", "migrate", "--noinput"]]
    spec.check = lambda since=None: health.http_ok(host, port, "/healthz", ca=ca)
    return spec


def _endpoint_escape(text: str) -> str:
    """Twisted endpoint strings separate fields with ':' (IPv6 addresses, odd paths)."""
    return text.replace("\\", "\\\\").replace(":", "\\:")


def monitor_available() -> bool:
    """The console's monitor joins the stack once its management command exists."""
    return any(PROJECT_ROOT.glob("console/**/management/commands/monitor.py"))


def monitor_spec(state_dir: Path, settings: dict[str, str]) -> ServiceSpec:
    argv = [PYTHON, "manage.py", "monitor"]
    return _django_spec("monitor", "monitor", argv, state_dir, settings)


# ---------------------------------------------------------------- the whole stack


def _env_int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")
    return value


OAUTH_ENV = ("QUILL_OAUTH_JWKS_URL", "QUILL_OAUTH_ISSUER", "QUILL_OAUTH_AUDIENCE")


def _sasl_mechanisms(env: Mapping[str, str]) -> str:
    raw = env.get("QUILL_SASL_MECHANISMS", "")
    try:
        mechanisms = secure.check_mechanisms(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if raw.strip() and _security(env) != secure.SASL_SSL:
        raise ConfigError("QUILL_SASL_MECHANISMS applies to QUILL_SECURITY=sasl_ssl only")
    oauth_env = [k for k in OAUTH_ENV if env.get(k, "").strip()]
    if oauth_env and secure.OAUTHBEARER not in mechanisms:
        raise ConfigError(
            f"{', '.join(oauth_env)} apply to QUILL_SASL_MECHANISMS=SCRAM-SHA-512,OAUTHBEARER only"
        )
    return ",".join(mechanisms)


def _zk_nodes(env: Mapping[str, str]) -> int:
    nodes = _env_int(env, "QUILL_ZK_NODES", 1, 1, 7)
    if nodes % 2 == 0:
        raise ConfigError(f"QUILL_ZK_NODES must be odd (a majority must survive), got {nodes}")
    return nodes


def _security(env: Mapping[str, str]) -> str:
    try:
        return secure.check_mode(env.get("QUILL_SECURITY", ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class StackConfig:
    """What `quill-stack` runs; every field has a QUILL_ env var (see README)."""

    state_dir: Path
    brokers: int = 3
    host: str = "127.0.0.1"
    zk_port: int = 2181
    redis_port: int = 6379
    broker_base_port: int = 9092
    console_port: int = 8000
    services: tuple[str, ...] = ()  # empty: all
    metrics_base_port: int = 9404  # broker N serves /metrics on base + N - 1; 0: none
    security: str = secure.PLAINTEXT  # or secure.SASL_SSL (quill_stack/secure.py)
    sasl_mechanisms: str = secure.MECHANISM  # the secure stack's: OAUTHBEARER may be added
    oauth_jwks_url: str = ""  # OAUTHBEARER with OIDC tokens; unsecured tokens without
    oauth_issuer: str = ""
    oauth_audience: str = ""
    zk_nodes: int = 1  # 3 or 5: a ZooKeeper ensemble on zk_port, zk_port+1, ...

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackConfig:
        env = os.environ if env is None else env
        services = tuple(s.strip() for s in env.get("QUILL_SERVICES", "").split(",") if s.strip())
        state_dir = Path(env.get("QUILL_STATE_DIR") or PROJECT_ROOT / ".state")
        return cls(
            state_dir=state_dir.absolute(),
            brokers=_env_int(env, "QUILL_BROKERS", 3, 0, 32),
            host=env.get("QUILL_HOST") or "127.0.0.1",
            zk_port=_env_int(env, "QUILL_ZK_PORT", 2181, 1, 65535),
            redis_port=_env_int(env, "QUILL_REDIS_PORT", 6379, 1, 65535),
            broker_base_port=_env_int(env, "QUILL_BROKER_BASE_PORT", 9092, 1, 65535),
            console_port=_env_int(env, "QUILL_CONSOLE_PORT", 8000, 1, 65535),
            services=services,
            metrics_base_port=_env_int(env, "QUILL_METRICS_BASE_PORT", 9404, 0, 65535),
            security=_security(env),
            sasl_mechanisms=_sasl_mechanisms(env),
            oauth_jwks_url=env.get("QUILL_OAUTH_JWKS_URL", "").strip(),
            oauth_issuer=env.get("QUILL_OAUTH_ISSUER", "").strip(),
            oauth_audience=env.get("QUILL_OAUTH_AUDIENCE", "").strip(),
            zk_nodes=_zk_nodes(env),
        )

    @property
    def oauth(self) -> secure.OAuthOptions | None:
        """OAUTHBEARER's settings when the secure stack offers it."""
        if secure.OAUTHBEARER not in self.sasl_mechanisms.split(","):
            return None
        return secure.OAuthOptions(self.oauth_jwks_url, self.oauth_issuer, self.oauth_audience)

    def to_json(self) -> dict:
        data = asdict(self)
        data["state_dir"] = str(self.state_dir)
        data["services"] = list(self.services)
        return data

    @classmethod
    def from_json(cls, data: dict) -> StackConfig:
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["state_dir"] = Path(data["state_dir"])
        data["services"] = tuple(data.get("services", ()))
        return cls(**data)

    @property
    def zk_connect(self) -> str:
        if self.zk_nodes > 1:
            return ensemble_connect(local_ensemble(self.host, self.zk_port, self.zk_nodes))
        return f"{self.host}:{self.zk_port}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.host}:{self.redis_port}/0"

    @property
    def bootstrap(self) -> str:
        ports = range(self.broker_base_port, self.broker_base_port + self.brokers)
        return ",".join(f"{self.host}:{port}" for port in ports)


def metrics_overrides(base_port: int, index: int) -> dict[str, int]:
    """The metrics endpoint of the broker at ``index`` (0-based): base + index."""
    return {"quill.metrics.port": base_port + index} if base_port else {}


def secure_broker(spec: ServiceSpec, broker_id: int, cfg: StackConfig) -> None:
    """A SASL_SSL broker: the stack's SCRAM users in ZooKeeper before it starts, and
    its health checked over TLS."""
    spec.private_files = True  # server.properties holds the inter-broker password
    users = [PYTHON, "-m", "quill_stack.secure", "users", "--state-dir", str(cfg.state_dir)]
    spec.pre_start.append([*users, "--zookeeper", cfg.zk_connect])
    ca, host, port, zk = str(secure.ca_path(cfg.state_dir)), spec.host, spec.port, cfg.zk_connect
    creds = secure.zookeeper_credentials(cfg.state_dir)  # also in its server.properties
    spec.check = lambda since=None: health.broker(
        host, port, broker_id, zk, since, ca=ca, zk_credentials=creds
    )


def build_stack(cfg: StackConfig) -> list[ServiceSpec]:
    """Every process of the stack, in start order (see ServiceSpec.group)."""
    state = cfg.state_dir
    settings = app_env(state, cfg.redis_url, cfg.zk_connect, cfg.bootstrap)
    settings["QUILL_METRICS_BASE_PORT"] = str(cfg.metrics_base_port)
    zk_users = redis_password = None
    if cfg.security == secure.SASL_SSL:
        settings.update(secure.app_env(state))
        zk_users, redis_password = secure.zookeeper_users(state), secure.redis_password(state)
    if cfg.zk_nodes > 1:
        members = local_ensemble(cfg.host, cfg.zk_port, cfg.zk_nodes)
        specs = [zookeeper_ensemble_spec(state, n, members, sasl_users=zk_users) for n in members]
    else:
        specs = [zookeeper_spec(state, cfg.zk_port, cfg.host, sasl_users=zk_users)]
    specs.append(redis_spec(state, cfg.redis_port, cfg.host, password=redis_password))
    for index in range(cfg.brokers):
        port = cfg.broker_base_port + index
        overrides = metrics_overrides(cfg.metrics_base_port, index)
        if cfg.security == secure.SASL_SSL:
            name = f"broker-{index + 1}"
            overrides.update(secure.broker_overrides(state, name, cfg.host, port, cfg.oauth))
        spec = broker_spec(state, index + 1, port, cfg.zk_connect, cfg.brokers, cfg.host, overrides)
        if cfg.security == secure.SASL_SSL:
            secure_broker(spec, index + 1, cfg)
        specs.append(spec)
    specs.append(worker_spec(state, settings))
    if cfg.security == secure.SASL_SSL:
        pem, ca = secure.console_cert(state, cfg.host), secure.ca_path(state)
        specs.append(console_spec(state, settings, cfg.console_port, cfg.host, pem, ca))
    else:
        specs.append(console_spec(state, settings, cfg.console_port, cfg.host))
    if monitor_available():
        specs.append(monitor_spec(state, settings))
    return select(specs, cfg.services)


def select(specs: list[ServiceSpec], wanted: tuple[str, ...]) -> list[ServiceSpec]:
    """Keep the services named in `wanted` (a name like broker-2, or a kind like broker)."""
    if not wanted:
        return specs
    known = {s.name for s in specs} | {s.kind for s in specs}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(
            f"unknown service(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}"
        )
    return [s for s in specs if s.name in wanted or s.kind in wanted]
