"""quill-zookeeper-security-migration: Kafka's zookeeper-security-migration tool.

Sets the ACLs of every znode Kafka owns (ZkData.SecureRootPaths, recursively, and the
chroot's root itself) to what ``zookeeper.set.acl`` gives new znodes (``secure``: ALL
for the tool's SASL principal, READ for the world except below the sensitive paths),
or opens them all again (``unsecure``: world:anyone ALL). It logs in to ZooKeeper with
the Client section of the JAAS file named by QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG
(Kafka's -Djava.security.auth.login.config), which must be the brokers' principal: the
ACLs name the tool's login as the owner. The usual order to secure a running cluster,
as Kafka's security guide has it: give the brokers the JAAS file and restart them, then
set zookeeper.set.acl=true and restart them again, then run this with --zookeeper.acl=secure.

    quill-zookeeper-security-migration --zookeeper.acl=secure --zookeeper.connect=localhost:2181
"""

from __future__ import annotations

import argparse
import sys

from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.zk.security import (
    JAAS_CONFIG_ENV,
    ZkSecurityError,
    credentials_from_env,
    default_acls,
    zk_client,
)
from broker.zk.znodes import SECURE_ROOT_PATHS, ControllerZNode

PROG = "quill-zookeeper-security-migration"
WAVE = 1000  # znodes whose ACLs are set at once (pipelined), as Kafka's migrator queues them


class MigrationError(Exception):
    pass


def _child_path(parent: str, child: str) -> str:
    return f"{parent.rstrip('/')}/{child}"


class ZkSecurityMigrator:
    """Kafka's kafka.admin.ZkSecurityMigrator on a started kazoo client."""

    def __init__(self, client, secure: bool, out=sys.stdout) -> None:
        self.client = client
        self.secure = secure
        self.out = out

    def set_acls(self, paths: list[str]) -> list[str]:
        """Set the ACLs of ``paths`` (pipelined); return their children's paths. A znode
        deleted meanwhile is skipped, as Kafka's migrator skips it."""
        pending = [(p, self.client.set_acls_async(p, default_acls(self.secure, p))) for p in paths]
        children = [(p, self.client.get_children_async(p)) for p, _ in pending]
        found = []
        for (path, acl_result), (_, kids) in zip(pending, children, strict=True):
            try:
                acl_result.get()
                found += [_child_path(path, c) for c in kids.get()]
            except NoNodeError:
                continue
            except NoAuthError:
                raise MigrationError(
                    f"not allowed to set the ACL of {path}: it does not give this tool's "
                    "SASL principal ADMIN (log in as the brokers' principal)"
                ) from None
        return found

    def set_acls_recursively(self, root: str) -> int:
        count, wave = 0, [root]
        while wave:
            batch, wave = wave[:WAVE], wave[WAVE:]
            wave += self.set_acls(batch)
            count += len(batch)
        return count

    def run(self, enable_path_check: bool = False) -> int:
        word = "secure" if self.secure else "unsecure"
        self.set_acls(["/"])  # the chroot itself, not its children (setAclIndividually)
        if enable_path_check:
            missing = [p for p in SECURE_ROOT_PATHS if not self.client.exists(p)]
            if missing:
                raise MigrationError(f"paths missing (--enable.path.check): {', '.join(missing)}")
        total = 1
        for path in SECURE_ROOT_PATHS:
            if path == ControllerZNode.path and not self.client.exists(path):
                continue  # ephemeral: not made here when no controller is elected
            self.client.ensure_path(path)
            count = self.set_acls_recursively(path)
            total += count
            print(f"{path}: {count} znode(s) set {word}", file=self.out, flush=True)
        print(f"done: {total} znode(s) set {word}", file=self.out, flush=True)
        return total


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Secure or unsecure the ACLs of a Kafka cluster's znodes in ZooKeeper "
        "(Kafka's zookeeper-security-migration). The tool logs in to ZooKeeper with the "
        f"Client section of the JAAS file named by {JAAS_CONFIG_ENV}.",
    )
    parser.add_argument(
        "--zookeeper.acl",
        dest="acl",
        required=True,
        choices=["secure", "unsecure"],
        help="make the Kafka znodes secure (ALL for the tool's SASL principal, READ for "
        "the world except sensitive paths) or unsecure (world:anyone ALL)",
    )
    parser.add_argument(
        "--zookeeper.connect",
        dest="connect",
        required=True,
        help="host:port[,host:port][/chroot] of ZooKeeper",
    )
    parser.add_argument(
        "--zookeeper.session.timeout",
        dest="session_timeout",
        type=int,
        default=30000,
        help="ZooKeeper session timeout, ms (default 30000)",
    )
    parser.add_argument(
        "--zookeeper.connection.timeout",
        dest="connection_timeout",
        type=int,
        default=30000,
        help="time to wait for ZooKeeper, ms (default 30000)",
    )
    parser.add_argument(
        "--enable.path.check",
        dest="path_check",
        action="store_true",
        help="check that every root path exists before migrating; exit if one is missing",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    secure = args.acl == "secure"
    try:
        credentials = credentials_from_env()
    except ZkSecurityError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if credentials is None:
        print(
            "ERROR: No JAAS configuration file has been specified. Set "
            f"{JAAS_CONFIG_ENV} to a JAAS file whose Client section logs in to ZooKeeper "
            "as the brokers' principal (Kafka: java.security.auth.login.config)",
            file=sys.stderr,
        )
        return 1
    client = zk_client(args.connect, args.session_timeout / 1000.0, credentials, set_acl=secure)
    try:
        client.start(timeout=args.connection_timeout / 1000.0)
    except (KazooTimeoutError, KazooException) as exc:
        print(f"ERROR: cannot log in to ZooKeeper at {args.connect}: {exc}", file=sys.stderr)
        client.close()
        return 1
    try:
        ZkSecurityMigrator(client, secure).run(args.path_check)
    except MigrationError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    finally:
        client.stop()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
