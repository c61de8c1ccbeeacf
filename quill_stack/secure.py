"""The secure stack: ``quill-stack up`` with ``QUILL_SECURITY=sasl_ssl`` (``make up SECURE=1``).

Each broker port is one SASL_SSL listener (SCRAM-SHA-512), also the inter-broker
listener, as Kafka's security guide sets up a cluster: brokers authenticate to each
other as the SCRAM user ``broker``. The authorizer is on with
``allow.everyone.if.no.acl.found=false``; ``super.users`` are the brokers' user and the
operator's ``admin``. What it writes under the state dir:

- ``tls/``: the CA and one PEM keystore per broker (quill_stack.tls);
- ``secrets/<user>.password``: the SCRAM users' passwords, made once (mode 0600);
- ``/config/users/admin`` and ``/config/users/broker`` in ZooKeeper, in Kafka's stored
  form, before the brokers start, as ``kafka-configs --zookeeper --alter --add-config
  'SCRAM-SHA-512=[password=...]'`` wrote them (``python -m quill_stack.secure users``, a
  broker's pre-start step);
- ``client-admin.properties``: the admin's client properties, for ``--command-config``
  and for the console, worker and monitor (``QUILL_CLIENT_CONFIG``);
- ZooKeeper takes only SASL DIGEST-MD5 logins (``zookeeper/jaas.conf``, its Server
  section, written with ZooKeeper's zoo.cfg by quill_stack.services); the brokers, the
  console, monitor, worker and this module log in as ``kafka`` with
  ``zookeeper-client.jaas`` (its Client section; mode 0600), Kafka's
  ``java.security.auth.login.config``. Brokers run with ``zookeeper.set.acl=true``: a
  znode is ALL for ``sasl:kafka``, READ for the world, nothing for the world below
  /config/users, /config/brokers and /delegation_token/tokens (broker.zk.security). The
  console, monitor and worker are ``kafka`` too, as Kafka's admin tools share the
  brokers' JAAS file: they write what brokers write (configs, compaction requests);
- Redis has a password (``requirepass``, ``secrets/redis.password``), passed to the
  console, worker and monitor as the file's path (``QUILL_REDIS_PASSWORD_FILE``).

``QUILL_SASL_MECHANISMS=SCRAM-SHA-512,OAUTHBEARER`` also offers OAUTHBEARER on the
listener (SCRAM stays: the brokers and the admin use it): unsecured JWTs (development)
or, with ``QUILL_OAUTH_JWKS_URL`` (and ``QUILL_OAUTH_ISSUER``, ``QUILL_OAUTH_AUDIENCE``),
tokens signed by an identity provider, checked by Kafka's
OAuthBearerValidatorCallbackHandler against its JWKS (``OAuthOptions``).

The brokers' server.properties hold the inter-broker password, so they are written
0600 too. ``compose-init`` makes the same things for the compose secure profile
(docker-compose.secure.yml) in its volume.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from broker.security.jaas import jaas_section
from broker.security.scram_credentials import ScramCredential, credentials_in
from broker.zk.client import KafkaZkClient
from broker.zk.security import (
    DEFAULT_CLIENT_SECTION,
    DIGEST_LOGIN_MODULE,
    JAAS_CONFIG_ENV,
    JAAS_CONFIG_KEY,
    ZkCredentials,
    read_client_credentials,
)
from broker.zk.znodes import ConfigType
from quill_stack.redis_auth import PASSWORD_FILE_ENV as REDIS_PASSWORD_FILE_ENV
from quill_stack.state import write_private
from quill_stack.tls import ensure_ca, ensure_server_cert

PLAINTEXT, SASL_SSL = "plaintext", "sasl_ssl"
MODES = (PLAINTEXT, SASL_SSL)
MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
BROKER_USER, ADMIN_USER = "broker", "admin"
USERS = (BROKER_USER, ADMIN_USER)
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER = "OAUTHBEARER"
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@dataclass(frozen=True)
class OAuthOptions:
    """OAUTHBEARER on the stack's SASL listeners: unsecured tokens without a JWKS URL."""

    jwks_url: str = ""
    issuer: str = ""
    audience: str = ""

    def listener_properties(self, listener: str) -> dict[str, str]:
        prefix = f"listener.name.{listener.lower()}.oauthbearer."
        props = {prefix + "sasl.jaas.config": f"{OAUTH_LOGIN_MODULE} required;"}
        if self.jwks_url:
            props[prefix + "sasl.server.callback.handler.class"] = OIDC_HANDLER
            props[prefix + "sasl.oauthbearer.jwks.endpoint.url"] = self.jwks_url
            if self.issuer:
                props[prefix + "sasl.oauthbearer.expected.issuer"] = self.issuer
            if self.audience:
                props[prefix + "sasl.oauthbearer.expected.audience"] = self.audience
        return props


def check_mechanisms(text: str) -> tuple[str, ...]:
    """QUILL_SASL_MECHANISMS: SCRAM-SHA-512, optionally with OAUTHBEARER."""
    names = [m.strip().upper() for m in (text or MECHANISM).split(",") if m.strip()]
    mechanisms = tuple(dict.fromkeys(names))
    if MECHANISM not in mechanisms or not set(mechanisms) <= {MECHANISM, OAUTHBEARER}:
        raise ValueError(
            f"QUILL_SASL_MECHANISMS must be {MECHANISM} or {MECHANISM},{OAUTHBEARER}, got {text!r}"
        )
    return mechanisms


ZOOKEEPER_USER = "kafka"  # every process's ZooKeeper principal: sasl:kafka


def check_mode(mode: str) -> str:
    mode = (mode or PLAINTEXT).strip().lower()
    if mode not in MODES:
        raise ValueError(f"QUILL_SECURITY must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def tls_dir(state_dir: Path) -> Path:
    return state_dir / "tls"


def ca_path(state_dir: Path) -> Path:
    return tls_dir(state_dir) / "ca.crt"


def admin_properties_path(state_dir: Path) -> Path:
    return state_dir / "client-admin.properties"


def password_path(state_dir: Path, user: str) -> Path:
    return state_dir / "secrets" / f"{user}.password"


def password(state_dir: Path, user: str) -> str:
    """The user's password, made the first time and kept under secrets/."""
    path = password_path(state_dir, user)
    if not path.exists():
        write_private(path, secrets.token_urlsafe(24).encode())
    return path.read_text().strip()


ZOOKEEPER_SECRET = f"zookeeper-{ZOOKEEPER_USER}"  # secrets/zookeeper-kafka.password


def zookeeper_users(state_dir: Path) -> dict[str, str]:
    """The SASL users ZooKeeper's Server section lists: the stack's one principal."""
    return {ZOOKEEPER_USER: password(state_dir, ZOOKEEPER_SECRET)}


# A secured ZooKeeper's zoo.cfg keys: SASL logins (DIGEST-MD5, the JAAS file's Server
# section) and no session that has not logged in (ZooKeeper 3.7+'s enforce.auth;
# sessionRequireClientSASLAuth is its ZooKeeper 3.6 spelling).
ZOOKEEPER_SASL_SETTINGS = {
    "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    "enforce.auth.enabled": "true",
    "enforce.auth.schemes": "sasl",
    "sessionRequireClientSASLAuth": "true",
}
ZOOKEEPER_SERVER_JAAS = "zookeeper/jaas.conf"  # under the state dir (compose: its volume)
REDIS_CONF = "redis/redis.conf"
# The uids the ZooKeeper and Redis images run as (containers/*/Dockerfile): compose-init
# hands them their files, mode 0600.
ZOOKEEPER_CONTAINER_UID, REDIS_CONTAINER_UID = 2181, 6379


def zookeeper_server_jaas(users: dict[str, str]) -> str:
    """ZooKeeper's JAAS Server section: DigestLoginModule, user_<name>="<password>" each."""
    options = {f"user_{name}": secret for name, secret in users.items()}
    return jaas_section("Server", DIGEST_LOGIN_MODULE, options)


def redis_auth_conf(secret: str) -> dict[str, str]:
    """redis.conf's requirepass line, quoted as redis.conf quotes strings."""
    return {"requirepass": '"' + secret.replace("\\", "\\\\").replace('"', '\\"') + '"'}


def zookeeper_jaas_path(state_dir: Path) -> Path:
    return state_dir / "zookeeper-client.jaas"


def write_zookeeper_jaas(state_dir: Path) -> Path:
    """``zookeeper-client.jaas`` (0600): the Client section every process logs in with."""
    [(user, secret)] = zookeeper_users(state_dir).items()
    options = {"username": user, "password": secret}
    text = jaas_section(DEFAULT_CLIENT_SECTION, DIGEST_LOGIN_MODULE, options)
    path = zookeeper_jaas_path(state_dir)
    if not path.exists() or path.read_text() != text:  # compose mounts it read-only
        write_private(path, text.encode())
    return path


def zookeeper_credentials(state_dir: Path) -> ZkCredentials:
    return read_client_credentials(write_zookeeper_jaas(state_dir))


def redis_password(state_dir: Path) -> str:
    return password(state_dir, "redis")


def jaas_config(user: str, secret: str) -> str:
    """Kafka's ScramLoginModule line for a client (here: a broker towards its peers)."""
    return f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{secret}";'


def cert_hosts(host: str, name: str) -> list[str]:
    """What a client may dial to reach this broker: the listener's host, the loopback
    names, the machine's names (a wildcard listener is advertised as the fqdn), and the
    container name."""
    return [host, "localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn(), name]


def security_properties(
    state_dir: Path, keystore: Path, listeners: list[str], oauth: OAuthOptions | None = None
) -> dict[str, str]:
    """The SASL (SCRAM-SHA-512, and OAUTHBEARER with ``oauth``), TLS and authorizer keys
    shared by every secure broker; each SASL listener gets its JAAS line, as Kafka wants
    one per SASL listener."""
    jaas = jaas_config(BROKER_USER, password(state_dir, BROKER_USER))
    props = {
        "sasl.enabled.mechanisms": MECHANISM + (f",{OAUTHBEARER}" if oauth else ""),
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
    }
    for listener in listeners:
        props[f"listener.name.{listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config"] = jaas
        if oauth is not None:
            props |= oauth.listener_properties(listener)
    return props | {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_path(state_dir)),
        "ssl.client.auth": "none",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{u}" for u in USERS),
        JAAS_CONFIG_KEY: str(write_zookeeper_jaas(state_dir)),
        "zookeeper.set.acl": "true",
    }


def broker_overrides(
    state_dir: Path, name: str, host: str, port: int, oauth: OAuthOptions | None = None
) -> dict[str, str]:
    """server.properties keys of one broker of the secure stack: one SASL_SSL listener,
    for clients and for the other brokers."""
    advertised = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    keystore = ensure_server_cert(tls_dir(state_dir), name, cert_hosts(host, name))
    return {
        "listeners": f"{LISTENER}://{host}:{port}",
        "advertised.listeners": f"{LISTENER}://{advertised}:{port}",
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER}",
        "inter.broker.listener.name": LISTENER,
        **security_properties(state_dir, keystore, [LISTENER], oauth),
    }


def admin_client_properties(state_dir: Path) -> dict[str, str]:
    ensure_ca(tls_dir(state_dir))
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": password(state_dir, ADMIN_USER),
        "ssl.ca.location": str(ca_path(state_dir)),
    }


def write_admin_properties(state_dir: Path) -> Path:
    """``client-admin.properties`` (mode 0600: it holds the admin's password)."""
    props = admin_client_properties(state_dir)
    text = "# the stack's admin user: --command-config for every quill-* tool\n"
    text += properties(props)
    path = admin_properties_path(state_dir)
    write_private(path, text.encode())
    return path


def client_hint(cfg) -> str:
    """What to add after the bootstrap servers when telling people how to connect."""
    if cfg.security != SASL_SSL:
        return ""
    return f" (SASL_SSL: --command-config {admin_properties_path(cfg.state_dir)})"


def console_cert(state_dir: Path, host: str) -> Path:
    """The console's HTTPS keystore (key, certificate, CA), signed by the stack's CA."""
    return ensure_server_cert(tls_dir(state_dir), "console", cert_hosts(host, "console"))


def console_url(cfg) -> str:
    """Where a browser finds the console (HTTPS in the secure stack, trusting the CA)."""
    if cfg.security == SASL_SSL:
        return f"https://localhost:{cfg.console_port}/ (CA: {ca_path(cfg.state_dir)})"
    return f"http://localhost:{cfg.console_port}/"


def app_env(state_dir: Path) -> dict[str, str]:
    """What the console, worker and monitor get: the admin's client properties, the
    ZooKeeper login and the Redis password, each as a 0600 file's path."""
    redis_password(state_dir)
    return {
        "QUILL_CLIENT_CONFIG": str(write_admin_properties(state_dir)),
        JAAS_CONFIG_ENV: str(write_zookeeper_jaas(state_dir)),
        REDIS_PASSWORD_FILE_ENV: str(password_path(state_dir, "redis")),
    }


def ensure_scram_users(state_dir: Path, zk_connect: str, zk_login: bool = True) -> list[str]:
    """Write each stack user's SCRAM-SHA-512 credential to ``/config/users/<user>``
    unless the one there already matches its password (other keys, e.g. quotas, stay).
    ``zk_login``: log in to ZooKeeper as the stack's `kafka` user and write with its
    ACLs (the secure stack's ZooKeeper takes nothing else); False for a ZooKeeper
    without SASL. Returns the users written."""
    credentials = zookeeper_credentials(state_dir) if zk_login else None
    zk = KafkaZkClient(zk_connect, credentials=credentials, set_acl=zk_login)
    zk.start()
    written = []
    try:
        for user in USERS:
            secret = password(state_dir, user)
            config = zk.get_entity_config(ConfigType.USER, user)
            current = credentials_in(config).get(MECHANISM)
            if current is not None and current == ScramCredential.from_password(
                MECHANISM, secret, current.iterations, current.salt
            ):
                continue
            config[MECHANISM] = ScramCredential.from_password(MECHANISM, secret).to_config_value()
            zk.set_entity_config(ConfigType.USER, user, config)
            written.append(user)
    finally:
        zk.close()
    return written


COMPOSE_LISTENERS = ["INTERNAL", "EXTERNAL"]  # docker-compose.yml's two listeners


def compose_init(config_dir: Path, brokers: int, hosts: list[str]) -> None:
    """What the compose secure profile's `secure-init` container makes in its volume
    before ZooKeeper, Redis and the brokers start: the CA, one keystore naming every
    broker container and the host's names, the console's HTTPS keystore,
    ``broker.properties`` (the security keys no env var can carry: a JAAS line per
    listener), ``client-admin.properties``, the ZooKeeper client and server JAAS files and
    Redis's ``requirepass``. The SCRAM users go to ZooKeeper once it runs (``users``, the
    `secure-users` container)."""
    names = [f"broker-{i}" for i in range(1, brokers + 1)] + ["localhost", "127.0.0.1", *hosts]
    keystore = ensure_server_cert(tls_dir(config_dir), "broker", names)
    props = security_properties(config_dir, keystore, COMPOSE_LISTENERS)
    text = "# the compose secure profile's broker security settings (quill_stack.secure)\n"
    write_private(config_dir / "broker.properties", (text + properties(props)).encode())
    write_admin_properties(config_dir)
    server_jaas = zookeeper_server_jaas(zookeeper_users(config_dir))
    write_private(config_dir / ZOOKEEPER_SERVER_JAAS, server_jaas.encode())
    redis_conf = "".join(
        f"{k} {v}\n" for k, v in redis_auth_conf(redis_password(config_dir)).items()
    )
    write_private(config_dir / REDIS_CONF, redis_conf.encode())
    # the console's HTTPS keystore (tls/console.pem): its container name and the host's
    ensure_server_cert(
        tls_dir(config_dir), "console", ["console", "localhost", "127.0.0.1", *hosts]
    )


def properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _chown_tree(root: Path, owner: str) -> None:
    """Everything to `owner` (the apps' user), but ZooKeeper's and Redis's own files to
    the uids their images run as: each reads only its own secret."""
    import pwd

    entry = pwd.getpwnam(owner)
    for path in [root, *root.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)
    for name, uid in (
        (ZOOKEEPER_SERVER_JAAS, ZOOKEEPER_CONTAINER_UID),
        (REDIS_CONF, REDIS_CONTAINER_UID),
    ):
        os.chown(root / name, uid, uid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quill_stack.secure",
        description="the secure stack's SCRAM users in ZooKeeper (a broker pre-start step; "
        "the compose profile's secure-users), or the files the compose secure profile needs "
        "before anything starts (compose-init)",
    )
    parser.add_argument("command", choices=["users", "compose-init"])
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--zookeeper", help="users: HOST:PORT[/chroot]")
    parser.add_argument("--brokers", type=int, default=3, help="compose-init: broker-1..N")
    parser.add_argument("--host", action="append", default=[], help="compose-init: more names")
    parser.add_argument("--owner", help="compose-init: the user that owns the files")
    args = parser.parse_args(argv)
    if args.command == "compose-init":
        compose_init(args.state_dir, args.brokers, args.host)
        if args.owner:
            _chown_tree(args.state_dir, args.owner)
        print(f"secure config in {args.state_dir}", file=sys.stderr)
        return 0
    if not args.zookeeper:
        parser.error("users needs --zookeeper HOST:PORT[/chroot]")
    written = ensure_scram_users(args.state_dir, args.zookeeper)
    users = ", ".join(written) or "none (already there)"
    print(f"SCRAM users written to /config/users: {users}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
