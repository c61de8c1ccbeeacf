"""The compose secure profile (docker-compose.secure.yml over docker-compose.yml): the
merged file is valid and secures every broker listener and every client, and what its
`secure-init` container runs (python -m quill_stack.secure compose-init) makes a working
configuration, run here for real against a real ZooKeeper."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml
from cryptography import x509

from broker.cli.common import read_properties_file
from broker.security.jaas import parse_jaas_file
from broker.zk.security import zk_client
from quill_stack import secure
from quill_stack.services import PROJECT_ROOT
from quill_stack.state import write_private

FILES = ["-f", "docker-compose.yml", "-f", "docker-compose.secure.yml"]
SECURE_DIR = "/etc/quill/secure"
BROKERS = ("broker-1", "broker-2", "broker-3")
ZOOKEEPERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")  # the ensemble
CLIENTS = ("worker", "console", "monitor", "spark-master", "spark-worker", "clickstream-job")


@pytest.fixture(scope="module")
def compose() -> dict:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is not installed; run `make install`", pytrace=False)
    result = subprocess.run(
        [binary, *FILES, "--profile", "pipeline", "config"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def _mounts(service: dict) -> dict[str, str]:
    """target -> source of a service's volumes (docker-compose v1 prints src:dst:mode)."""
    out = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            out[volume["target"]] = volume["source"]
        else:
            source, target = volume.split(":")[:2]
            out[target] = source
    return out


def test_every_broker_listener_is_sasl_ssl_after_secure_init(compose):
    services = compose["services"]
    init = services["secure-init"]
    assert init["command"][:4] == ["python", "-m", "quill_stack.secure", "compose-init"]
    assert init["command"][init["command"].index("--brokers") + 1] == str(len(BROKERS))
    assert _mounts(init)[SECURE_DIR] == "secure-config"
    assert "secure-config" in compose["volumes"]
    for name in BROKERS:
        broker = services[name]
        env = broker["environment"]
        listeners = [item.split("://")[0] for item in env["QUILL_LISTENERS"].split(",")]
        protocols = dict(
            item.split(":") for item in env["QUILL_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
        )
        assert protocols == {listener: "SASL_SSL" for listener in listeners}, name
        assert env["QUILL_INTER_BROKER_LISTENER_NAME"] in listeners
        assert broker["command"] == ["quill-broker", f"{SECURE_DIR}/broker.properties"]
        assert _mounts(broker)[SECURE_DIR] == "secure-config"
        assert broker["depends_on"]["secure-users"] == {  # which runs after secure-init
            "condition": "service_completed_successfully"
        }
        test = broker["healthcheck"]["test"]
        assert test[test.index("--ssl-ca") + 1] == f"{SECURE_DIR}/tls/ca.crt"


def test_every_client_gets_the_admin_properties(compose):
    services = compose["services"]
    for name in CLIENTS:
        service = services[name]
        path = service["environment"]["QUILL_CLIENT_CONFIG"]
        assert path == f"{SECURE_DIR}/client-admin.properties", name
        assert _mounts(service)[SECURE_DIR] == "secure-config", name


def test_zookeeper_and_redis_take_logins_and_zookeeper_is_not_published(compose):
    services = compose["services"]
    jaas = f"{SECURE_DIR}/{secure.ZOOKEEPER_SERVER_JAAS}"
    for name in ZOOKEEPERS:  # every server of the ensemble
        zookeeper = services[name]
        assert not zookeeper.get("ports"), f"the secure profile publishes {name}"
        env = zookeeper["environment"]
        extra = dict(item.split("=", 1) for item in env["ZOO_CFG_EXTRA"].split())
        assert secure.ZOOKEEPER_SASL_SETTINGS.items() <= extra.items(), name
        assert env["JVMFLAGS"] == f"-Djava.security.auth.login.config={jaas}", name
        assert _mounts(zookeeper)[SECURE_DIR] == "secure-config", name
    assert services["redis"]["command"][:2] == ["redis-server", f"{SECURE_DIR}/{secure.REDIS_CONF}"]
    assert secure.REDIS_CONF in " ".join(services["redis"]["healthcheck"]["test"])
    for name in (*ZOOKEEPERS, "redis"):
        assert services[name]["depends_on"]["secure-init"] == {
            "condition": "service_completed_successfully"
        }
    client_jaas = f"{SECURE_DIR}/zookeeper-client.jaas"
    for name in BROKERS:
        assert services[name]["environment"]["QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG"] == client_jaas
        assert "secure-users" in services[name]["depends_on"]
    for name in ("worker", "console", "monitor"):
        env = services[name]["environment"]
        assert env["QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG"] == client_jaas, name
        assert env["QUILL_REDIS_PASSWORD_FILE"] == f"{SECURE_DIR}/secrets/redis.password", name
    users = services["secure-users"]["command"]
    assert users[:4] == ["python", "-m", "quill_stack.secure", "users"]


def test_no_compose_stack_publishes_zookeeper_or_redis():
    """ZooKeeper and Redis stay inside the compose network, plaintext or secure (issue 25):
    `docker-compose config` of what `docker-compose up` reads gives neither a port."""
    result = subprocess.run(
        [shutil.which("docker-compose") or "docker-compose", "config"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    for name in (*ZOOKEEPERS, "redis"):
        assert "ports" not in services[name], name


def test_compose_init_makes_a_working_configuration(tmp_path, secured_zookeeper):
    argv = [sys.executable, "-m", "quill_stack.secure", "compose-init"]
    argv += ["--state-dir", str(tmp_path), "--brokers", "3", "--host", "kafka.example"]
    # the secured ZooKeeper's `kafka` password stands for the one compose-init would make
    secret = secure.password_path(tmp_path, secure.ZOOKEEPER_SECRET)
    write_private(secret, secured_zookeeper.credentials.password.encode())
    subprocess.run(argv, cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=120)
    server = parse_jaas_file((tmp_path / secure.ZOOKEEPER_SERVER_JAAS).read_text())["Server"]
    assert server[0].options == {"user_kafka": secured_zookeeper.credentials.password}
    redis_password = (tmp_path / "secrets" / "redis.password").read_text()
    assert (tmp_path / secure.REDIS_CONF).read_text() == f'requirepass "{redis_password}"\n'
    for name in (secure.ZOOKEEPER_SERVER_JAAS, secure.REDIS_CONF, "zookeeper-client.jaas"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0, name

    chroot = f"/quill-compose-{uuid.uuid4().hex[:10]}"
    zk = zk_client(secured_zookeeper.address, 10, secured_zookeeper.credentials)
    zk.start(timeout=30)
    zk.ensure_path(chroot)
    try:
        argv = [sys.executable, "-m", "quill_stack.secure", "users", "--state-dir", str(tmp_path)]
        argv += ["--zookeeper", secured_zookeeper.address + chroot]
        subprocess.run(argv, cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=120)
        users = sorted(zk.get_children(f"{chroot}/config/users"))
        configs = [json.loads(zk.get(f"{chroot}/config/users/{u}")[0]) for u in users]
    finally:
        zk.delete(chroot, recursive=True)
        zk.stop()
        zk.close()
    assert users == ["admin", "broker"]
    assert all(set(c["config"]) == {"SCRAM-SHA-512"} for c in configs)

    props = read_properties_file(str(tmp_path / "broker.properties"))
    broker_password = (tmp_path / "secrets" / "broker.password").read_text()
    for listener in ("internal", "external"):  # docker-compose.yml's two listeners
        jaas = props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"]
        assert f'username="broker" password="{broker_password}";' in jaas
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["zookeeper.set.acl"] == "true"
    assert props["java.security.auth.login.config"] == str(tmp_path / "zookeeper-client.jaas")
    keystore = tmp_path / "tls" / "broker.pem"
    assert props["ssl.keystore.location"] == str(keystore)
    ca = x509.load_pem_x509_certificate((tmp_path / "tls" / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificates(keystore.read_bytes())[0]
    leaf.verify_directly_issued_by(ca)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {*BROKERS, "localhost", "kafka.example"} <= set(san.get_values_for_type(x509.DNSName))
    # the console's HTTPS keystore (docker-compose.secure.yml: daphne's ssl endpoint)
    console = x509.load_pem_x509_certificates((tmp_path / "tls" / "console.pem").read_bytes())[0]
    console.verify_directly_issued_by(ca)
    san = console.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"console", "localhost", "kafka.example"} <= set(san.get_values_for_type(x509.DNSName))

    client = read_properties_file(str(tmp_path / "client-admin.properties"))
    assert client["ssl.ca.location"] == str(tmp_path / "tls" / "ca.crt")
    assert (client["sasl.username"], client["security.protocol"]) == ("admin", "SASL_SSL")
