"""ZooKeeper authentication and znode ACLs, as Kafka's ZooKeeper client has them.

Authentication: SASL DIGEST-MD5 with the ``Client`` section of a JAAS file (Kafka's
``-Djava.security.auth.login.config``; here the broker key of that name or the env var
``QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG``; the section name is
``zookeeper.sasl.clientconfig``)::

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka" password="kafka-secret";
    };

ACLs: one policy for every znode anyone of ours creates, Kafka's ZkData.defaultAcls.
With ``zookeeper.set.acl=true`` (brokers) or a SASL login (tools, as Kafka's tools take
``JaasUtils.isZkSaslEnabled``), a new znode gets ALL for its creator's SASL principal
(``sasl:<user>``) and READ for the world, except below Kafka's sensitive paths (SCRAM
credentials, broker configs, delegation tokens) where the world gets nothing. Without
it, znodes are open (world:anyone ALL), as Kafka's default.

``zk_client`` builds the KazooClient every process uses (broker, console, monitor,
workers, the stack's tools), so the policy is applied in one place: any ``create`` or
``ensure_path`` or transaction create without an explicit ACL gets ``default_acls``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from broker.security.jaas import parse_jaas_file

from .poll_handler import PollingHandler
from .znodes import SENSITIVE_ROOT_PATHS

JAAS_CONFIG_KEY = "java.security.auth.login.config"
JAAS_CONFIG_ENV = "QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG"
CLIENT_SECTION_KEY = "zookeeper.sasl.clientconfig"
CLIENT_SECTION_ENV = "QUILL_ZOOKEEPER_SASL_CLIENTCONFIG"
DEFAULT_CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
SASL_MECHANISM = "DIGEST-MD5"


class ZkSecurityError(ValueError):
    """A JAAS file or ACL setting we cannot work with; the message says what to fix."""


@dataclass(frozen=True)
class ZkCredentials:
    """The SASL DIGEST-MD5 login of a ZooKeeper client."""

    username: str
    password: str

    def __repr__(self) -> str:  # never print the password
        return f"ZkCredentials(username={self.username!r})"

    @property
    def principal(self) -> str:
        """The id ZooKeeper's ACLs name it by (scheme sasl)."""
        return f"sasl:{self.username}"

    def sasl_options(self) -> dict[str, str]:
        return {"mechanism": SASL_MECHANISM, "username": self.username, "password": self.password}


def read_client_credentials(
    jaas_path: str | Path, section: str = DEFAULT_CLIENT_SECTION
) -> ZkCredentials:
    """The username/password of the DigestLoginModule in ``section`` of a JAAS file."""
    try:
        sections = parse_jaas_file(Path(jaas_path).read_text())
    except OSError as exc:
        raise ZkSecurityError(f"cannot read the JAAS file {jaas_path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ZkSecurityError(f"the JAAS file {jaas_path} is not valid: {exc}") from None
    if section not in sections:
        raise ZkSecurityError(
            f"the JAAS file {jaas_path} has no '{section}' section for the ZooKeeper client "
            f"(sections: {', '.join(sections) or 'none'})"
        )
    for entry in sections[section]:
        if entry.login_module == DIGEST_LOGIN_MODULE and entry.username and entry.password:
            return ZkCredentials(entry.username, entry.password)
    raise ZkSecurityError(
        f"section '{section}' of {jaas_path} needs {DIGEST_LOGIN_MODULE} required "
        'username="..." password="..."; (SASL DIGEST-MD5 is the only mechanism we speak)'
    )


def credentials_from_env(environ: Mapping[str, str] | None = None) -> ZkCredentials | None:
    """The ZooKeeper login of a tool, console, monitor or worker process: the JAAS file
    named by QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG, or None (no SASL)."""
    environ = os.environ if environ is None else environ
    path = environ.get(JAAS_CONFIG_ENV, "").strip()
    if not path:
        return None
    section = environ.get(CLIENT_SECTION_ENV, "").strip() or DEFAULT_CLIENT_SECTION
    return read_client_credentials(path, section)


def sensitive_path(path: str) -> bool:
    """Kafka's ZkData.sensitivePath: the path is below a root that holds secrets."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls: creator ALL, plus world READ unless sensitive."""
    if not secure:
        return list(OPEN_ACL_UNSAFE)
    if sensitive_path(path):
        return list(CREATOR_ALL_ACL)
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


class _PolicyAcl(list):
    """An ACL the policy chose for one path: the parents made on the way choose their own."""


class _PolicyTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        if acl is None:
            acl = self.client.acls_for(path)
        return super().create(path, value, acl, ephemeral, sequence)


class PolicyKazooClient(KazooClient):
    """A KazooClient whose creates without an explicit ACL follow ``default_acls``."""

    def __init__(self, *args, secure_acls: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.secure_acls = secure_acls

    def acls_for(self, path: str) -> list[ACL]:
        return _PolicyAcl(default_acls(self.secure_acls, path))

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        if acl is None:
            acl = self.acls_for(path)
        return super().create_async(path, value, acl, *args, **kwargs)

    def ensure_path_async(self, path, acl=None):
        if isinstance(acl, _PolicyAcl):
            acl = None  # kazoo passes a child's ACL to the parents it makes: not ours
        return super().ensure_path_async(path, acl)

    def transaction(self) -> TransactionRequest:
        return _PolicyTransaction(self)


def zk_client(
    connect: str,
    timeout: float = 10.0,
    credentials: ZkCredentials | None = None,
    set_acl: bool | None = None,
    **kwargs,
) -> PolicyKazooClient:
    """A (not yet started) KazooClient for ``connect``: SASL DIGEST-MD5 when there are
    credentials; secure ACLs when ``set_acl`` (default: when there are credentials, as
    Kafka's tools do). Secure ACLs without a SASL login are refused, as Kafka refuses
    zookeeper.set.acl=true without one: ZooKeeper could name no creator."""
    if set_acl is None:
        set_acl = credentials is not None
    if set_acl and credentials is None:
        raise ZkSecurityError(
            "zookeeper.set.acl is true but the ZooKeeper client has no SASL login: set "
            f"{JAAS_CONFIG_KEY} to a JAAS file with a '{DEFAULT_CLIENT_SECTION}' section"
        )
    if credentials is not None:
        kwargs["sasl_options"] = credentials.sasl_options()
    kwargs.setdefault("handler", PollingHandler())  # one poll per select (poll_handler.py)
    return PolicyKazooClient(hosts=connect, timeout=timeout, secure_acls=set_acl, **kwargs)
