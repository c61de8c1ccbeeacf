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
  and for the console, worker and monitor (``QUILL_CLIENT_CONFIG``).

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
from pathlib import Path

from broker.security.scram_credentials import ScramCredential, credentials_in
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


def password(state_dir: Path, user: str) -> str:
    """The user's password, made the first time and kept under secrets/."""
    path = state_dir / "secrets" / f"{user}.password"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(24).encode())
    return path.read_text().strip()


def jaas_config(user: str, secret: str) -> str:
    """Kafka's ScramLoginModule line for a client (here: a broker towards its peers)."""
    return f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{secret}";'


def cert_hosts(host: str, name: str) -> list[str]:
    """What a client may dial to reach this broker: the listener's host, the loopback
    names, the machine's names (a wildcard listener is advertised as the fqdn), and the
    container name."""
    return [host, "localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn(), name]


def security_properties(state_dir: Path, keystore: Path, listeners: list[str]) -> dict[str, str]:
    """The SASL (SCRAM-SHA-512), TLS and authorizer keys shared by every secure broker;
    each SASL listener gets its JAAS line, as Kafka wants one per SASL listener."""
    jaas = jaas_config(BROKER_USER, password(state_dir, BROKER_USER))
    props = {
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
    }
    for listener in listeners:
        props[f"listener.name.{listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config"] = jaas
    return props | {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_path(state_dir)),
        "ssl.client.auth": "none",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{u}" for u in USERS),
    }


def broker_overrides(state_dir: Path, name: str, host: str, port: int) -> dict[str, str]:
    """server.properties keys of one broker of the secure stack: one SASL_SSL listener,
    for clients and for the other brokers."""
    advertised = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    keystore = ensure_server_cert(tls_dir(state_dir), name, cert_hosts(host, name))
    return {
        "listeners": f"{LISTENER}://{host}:{port}",
        "advertised.listeners": f"{LISTENER}://{advertised}:{port}",
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER}",
        "inter.broker.listener.name": LISTENER,
        **security_properties(state_dir, keystore, [LISTENER]),
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
    """What the console, worker and monitor get: the admin's client properties."""
    return {"QUILL_CLIENT_CONFIG": str(write_admin_properties(state_dir))}


def ensure_scram_users(state_dir: Path, zk_connect: str) -> list[str]:
    """Write each stack user's SCRAM-SHA-512 credential to ``/config/users/<user>``
    unless the one there already matches its password (other keys, e.g. quotas, stay).
    Returns the users written."""
    from broker.zk.client import KafkaZkClient

    zk = KafkaZkClient(zk_connect)
    zk.start()
    written = []
    try:
        for user in USERS:
            secret = password(state_dir, user)
            config = zk.get_entity_config("users", user)
            current = credentials_in(config).get(MECHANISM)
            if current is not None and current == ScramCredential.from_password(
                MECHANISM, secret, current.iterations, current.salt
            ):
                continue
            config[MECHANISM] = ScramCredential.from_password(MECHANISM, secret).to_config_value()
            zk.set_entity_config("users", user, config)
            written.append(user)
    finally:
        zk.close()
    return written


COMPOSE_LISTENERS = ["INTERNAL", "EXTERNAL"]  # docker-compose.yml's two listeners


def compose_init(config_dir: Path, brokers: int, zk_connect: str, hosts: list[str]) -> None:
    """What the compose secure profile's `secure-init` container makes in its volume
    before the brokers start: the CA, one keystore naming every broker container and the
    host's names, the console's HTTPS keystore, ``broker.properties`` (the security keys no env var can carry: a JAAS
    line per listener), ``client-admin.properties``, and the SCRAM users in ZooKeeper."""
    names = [f"broker-{i}" for i in range(1, brokers + 1)] + ["localhost", "127.0.0.1", *hosts]
    keystore = ensure_server_cert(tls_dir(config_dir), "broker", names)
    props = security_properties(config_dir, keystore, COMPOSE_LISTENERS)
    text = "# the compose secure profile's broker security settings (quill_stack.secure)\n"
    write_private(config_dir / "broker.properties", (text + properties(props)).encode())
    write_admin_properties(config_dir)
    # the console's HTTPS keystore (tls/console.pem): its container name and the host's
    ensure_server_cert(
        tls_dir(config_dir), "console", ["console", "localhost", "127.0.0.1", *hosts]
    )
    ensure_scram_users(config_dir, zk_connect)


def properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _chown_tree(root: Path, owner: str) -> None:
    import pwd

    entry = pwd.getpwnam(owner)
    for path in [root, *root.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quill_stack.secure",
        description="the secure stack's SCRAM users in ZooKeeper (a broker pre-start step), "
        "or everything the compose secure profile needs (compose-init)",
    )
    parser.add_argument("command", choices=["users", "compose-init"])
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    parser.add_argument("--brokers", type=int, default=3, help="compose-init: broker-1..N")
    parser.add_argument("--host", action="append", default=[], help="compose-init: more names")
    parser.add_argument("--owner", help="compose-init: the user that owns the files")
    args = parser.parse_args(argv)
    if args.command == "compose-init":
        compose_init(args.state_dir, args.brokers, args.zookeeper, args.host)
        if args.owner:
            _chown_tree(args.state_dir, args.owner)
        print(f"secure config in {args.state_dir}; SCRAM users in ZooKeeper", file=sys.stderr)
        return 0
    written = ensure_scram_users(args.state_dir, args.zookeeper)
    users = ", ".join(written) or "none (already there)"
    print(f"SCRAM users written to /config/users: {users}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
