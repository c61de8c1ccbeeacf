"""docker-compose.yml is valid and runs the same processes, configured by the same keys,
as the local supervisor (whose list comes from quill_stack.services); every service is
built from this repository (ZooKeeper and Redis from Debian's packages, containers/), the
Python services from the one image; the pipeline's Spark services (profile `pipeline`)
use that image's `spark` target (plus Java and pyspark, so the default stack builds
without them) and run the clickstream job on their master with options the job accepts.
tests/test_compose_live.py builds and runs it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest
import yaml

from pipeline.jobs import clickstream_counts
from quill_stack.services import PROJECT_ROOT, StackConfig, build_stack

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
DEBIAN_IMAGES = {"zookeeper": "quill-zookeeper:latest", "redis": "quill-redis:latest"}
BUILT_IMAGES = {"quill": "quill:latest", "spark": "quill-spark:latest"}  # Dockerfile targets
# the optional `monitoring` profile runs the official Prometheus and Grafana images
MONITORING_IMAGES = {"prometheus", "grafana"}
SPARK_PROFILE = "pipeline"
SPARK_SERVICES = ("spark-master", "spark-worker", "clickstream-job")
# Values that name hosts, ports or paths differ between the two paths by design.
SITE_SPECIFIC = {
    "QUILL_LISTENERS",
    "QUILL_ADVERTISED_LISTENERS",
    "QUILL_LOG_DIRS",
    "QUILL_ZOOKEEPER_CONNECT",
    "QUILL_STATE_DIR",
    "QUILL_REDIS_URL",
    "QUILL_BOOTSTRAP_SERVERS",
    "ZOO_SERVERS",
}
# Only containers need two listeners (a host one and a network one) and restart brokers
# through the Docker engine; the supervisor's processes all share the host's addresses.
COMPOSE_ONLY = {
    "QUILL_LISTENER_SECURITY_PROTOCOL_MAP",
    "QUILL_INTER_BROKER_LISTENER_NAME",
    "QUILL_RESTART_DRIVER",
}


def docker_compose(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is not installed; run `make install`", pytrace=False)
    return subprocess.run(
        [binary, "-f", str(COMPOSE_FILE), *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def compose() -> dict:
    """The resolved compose file with every profile's services, as `docker-compose
    config` prints it."""
    result = docker_compose("--profile", SPARK_PROFILE, "config")
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """What `make up` starts with a ZooKeeper ensemble of three (QUILL_ZK_NODES=3), as
    compose runs it; otherwise default settings."""
    return build_stack(StackConfig(state_dir=tmp_path_factory.mktemp("state"), zk_nodes=3))


def image_kind(name: str) -> str:
    """zookeeper-2 -> zookeeper: the ensemble's servers share one image."""
    return "zookeeper" if name.startswith("zookeeper-") else name


@pytest.mark.parametrize(
    "profile",
    [[], ["--profile", SPARK_PROFILE], ["--profile", "monitoring"]],
    ids=["default", "pipeline", "monitoring"],
)
def test_compose_file_validates(profile):
    result = docker_compose(*profile, "config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_every_supervised_process_has_a_compose_service(compose, stack):
    missing = [spec.name for spec in stack if spec.name not in compose["services"]]
    assert not missing, f"docker-compose.yml lacks services for {missing}"
    assert {"zookeeper-1", "zookeeper-2", "zookeeper-3", "redis", "broker-1", "broker-2"} <= {
        spec.name for spec in stack
    }
    assert {"broker-3", "worker", "console"} <= {spec.name for spec in stack}


def compose_config(service: dict, via: str) -> dict[str, str]:
    if via == "env":
        return {k: str(v) for k, v in (service.get("environment") or {}).items()}
    command = service["command"]
    args = shlex.split(command) if isinstance(command, str) else command
    flags = {}
    for index, arg in enumerate(args):
        if arg.startswith("--"):
            value = args[index + 1] if index + 1 < len(args) else ""
            flags[arg[2:]] = '""' if value == "" else value
    return flags


def test_compose_services_have_the_same_configuration_keys(compose, stack):
    for spec in stack:
        service = compose["services"][spec.name]
        theirs = compose_config(service, spec.config_via)
        assert set(theirs) - COMPOSE_ONLY == set(spec.config), spec.name
        for key, value in spec.config.items():
            if key not in SITE_SPECIFIC:
                assert theirs[key] == value, f"{spec.name}: {key}"


def test_compose_services_are_healthchecked_restarted_and_keep_state(compose, stack):
    services = compose["services"]
    for spec in stack:
        service = services[spec.name]
        assert service.get("restart") == "unless-stopped", spec.name
        assert service.get("healthcheck", {}).get("test"), spec.name
    for name in [s.name for s in stack if s.kind in ("zookeeper", "broker", "console")]:
        sources = [volume_source(v) for v in services[name].get("volumes", [])]
        assert set(sources) & set(compose["volumes"]), f"{name} has no named volume"


def volume_source(volume: str | dict) -> str:
    """docker-compose v1 prints 'name:/path:rw', v2 a mapping."""
    return volume["source"] if isinstance(volume, dict) else volume.split(":", 1)[0]


def volume_target(volume: str | dict) -> str:
    return volume["target"] if isinstance(volume, dict) else volume.split(":")[1]


def test_python_services_share_one_image(compose, stack):
    services = compose["services"]
    images = {services[spec.name]["image"] for spec in stack if spec.kind not in DEBIAN_IMAGES}
    assert images == {"quill:latest"}
    for name, service in services.items():
        if name in MONITORING_IMAGES:
            continue
        assert service.get("build"), f"{name} is not built from this repository"
        image, build = service["image"], service["build"]
        if image_kind(name) in DEBIAN_IMAGES:
            assert image == DEBIAN_IMAGES[image_kind(name)]
            assert build["context"].endswith(f"containers/{image_kind(name)}")
        else:
            target = "spark" if name in SPARK_SERVICES else "quill"
            assert (image, build.get("target")) == (BUILT_IMAGES[target], target), name
        # every image builds FROM the same base (scripts/base-image.sh when offline)
        assert "BASE_IMAGE" in build["args"], name


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_spark_services_run_the_clickstream_job_on_their_master(compose):
    services = compose["services"]
    master, worker, job = (services[name] for name in SPARK_SERVICES)
    for name in SPARK_SERVICES:  # opt-in, and kept up like the rest of the stack
        assert services[name].get("profiles") == [SPARK_PROFILE], name
        assert services[name].get("restart") == "unless-stopped", name
        assert services[name].get("healthcheck", {}).get("test"), name
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    url = f"spark://{flag(master['command'], '--host')}:{flag(master['command'], '--port')}"
    assert worker["command"][:3] == ["spark-class", "org.apache.spark.deploy.worker.Worker", url]
    assert job["command"][:3] == ["python", "-m", "pipeline.jobs.clickstream_counts"]
    args = clickstream_counts.parse_args(job["command"][3:])  # the job's own options
    assert args.master == url
    assert args.input_partitions, "the job must not need its input topic to exist"
    conf = dict(item.split("=", 1) for item in args.conf)
    assert conf["spark.driver.host"] == "clickstream-job", "executors connect back to it"
    # the checkpoint is one directory for the driver and the executors
    mounts = [
        {
            volume_source(v)
            for v in s.get("volumes", [])
            if args.checkpoint.startswith(volume_target(v))
        }
        for s in (job, worker)
    ]
    assert mounts[0] and mounts[0] == mounts[1] and mounts[0] <= set(compose["volumes"])
    # the same cluster as the console and the Celery worker
    cluster = services["console"]["environment"]["QUILL_BOOTSTRAP_SERVERS"]
    assert job["environment"]["QUILL_BOOTSTRAP_SERVERS"] == cluster
    assert set(job["depends_on"]) >= {"spark-worker", "broker-1", "broker-2", "broker-3"}


def test_the_image_has_what_the_spark_services_run():
    """spark-class comes with pyspark (the pipeline extra) and needs a Java runtime: the
    `spark` target has both, the default `quill` target neither."""
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    quill, spark = dockerfile.split("FROM deps AS spark")
    assert "containers/requirements.py pipeline" in spark
    assert "default-jre-headless" in spark
    assert "pipeline" not in quill.split("AS quill", 1)[1]
    assert "jre" not in quill


# ---------------------------------------------------------------- what the stack exposes
SECURE_FILE = PROJECT_ROOT / "docker-compose.secure.yml"
DOCKER_RESTART_FILE = PROJECT_ROOT / "docker-compose.docker-restart.yml"
ALL_PROFILES = ("--profile", SPARK_PROFILE, "--profile", "monitoring")


def resolved(*files, env: dict | None = None) -> dict:
    """`docker-compose config` of these files with every profile, as a dict."""
    args = [a for f in (COMPOSE_FILE, *files) for a in ("-f", str(f))]
    result = subprocess.run(
        [shutil.which("docker-compose") or "docker-compose", *args, *ALL_PROFILES, "config"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def published(config: dict) -> dict[str, list[str]]:
    """{service: ["host_ip:published", ...]} for every port published on the host."""
    out = {}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            text = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port}"
            out.setdefault(name, []).append(str(text))
    return out


@pytest.mark.parametrize("files", [(), (SECURE_FILE,)], ids=["plain", "secure"])
def test_published_ports_bind_to_this_machine_only_by_default(files):
    ports = published(resolved(*files, env={"QUILL_BIND_ADDRESS": ""}))
    assert set(ports) == {
        "broker-1",
        "broker-2",
        "broker-3",
        "console",
        "spark-master",
        "prometheus",
        "grafana",
    }, ports  # ZooKeeper and Redis are reached by name inside the network only
    for service, items in ports.items():
        assert all(p.startswith("127.0.0.1:") for p in items), (service, items)
    wide = published(resolved(*files, env={"QUILL_BIND_ADDRESS": "0.0.0.0"}))
    assert all(p.startswith("0.0.0.0:") for items in wide.values() for p in items)


def _mounts_docker(service: dict) -> bool:
    return any("docker.sock" in str(v) for v in service.get("volumes", []))


def test_the_docker_socket_is_opt_in():
    for files in ((), (SECURE_FILE,)):
        config = resolved(*files)
        assert not [n for n, s in config["services"].items() if _mounts_docker(s)]
    opted = resolved(SECURE_FILE, DOCKER_RESTART_FILE)["services"]
    assert [n for n, s in opted.items() if _mounts_docker(s)] == ["worker"]
    assert opted["worker"]["environment"]["QUILL_RESTART_DRIVER"] == "docker"
    assert "console-state:/var/lib/quill" in str(opted["worker"]["volumes"])


def test_grafana_has_no_anonymous_access_and_no_password_in_the_file():
    grafana = resolved()["services"]["grafana"]
    env = grafana["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/run/secrets/grafana-admin-password"
    assert [s if isinstance(s, str) else s["source"] for s in grafana["secrets"]] == [
        "grafana-admin-password"
    ]
    script = (PROJECT_ROOT / "scripts" / "compose.sh").read_text()
    assert "QUILL_GRAFANA_PASSWORD_FILE" in script and "token_urlsafe" in script


def test_the_secure_console_speaks_https_only():
    console = resolved(SECURE_FILE)["services"]["console"]
    command = " ".join(console["command"])
    assert "daphne -e ssl:port=8000:" in command and "-b 0.0.0.0" not in command
    assert "privateKey=/etc/quill/secure/tls/console.pem" in command
    assert console["environment"]["QUILL_CONSOLE_TLS"] == "1"
    assert "--ssl-ca" in console["healthcheck"]["test"]
