"""The console and worker processes as the stack starts them, plus the Django skeleton."""

from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from io import StringIO

import pytest
from celery import Celery
from django.core.management import call_command

from quill_stack import ports, services
from quill_stack.process import ManagedProcess, child_env
from quill_stack.services import PROJECT_ROOT
from quill_stack.state import owner_env
from tests.stack_helpers import create_admin


@pytest.fixture
def app_settings(tmp_path, zookeeper, redis_server):
    return services.app_env(tmp_path, redis_server.url, zookeeper.address, "127.0.0.1:1")


@pytest.fixture
def running(tmp_path):
    """Start a ServiceSpec as the supervisor would; stopped after the test."""
    started: list[ManagedProcess] = []

    def start(spec: services.ServiceSpec) -> ManagedProcess:
        proc = ManagedProcess(spec, owner_env(tmp_path))
        started.append(proc)
        proc.start()
        proc.wait_healthy()
        return proc

    yield start
    for proc in reversed(started):
        assert proc.stop() is not None


def test_worker_runs_the_ping_task_through_redis(tmp_path, app_settings, redis_server, running):
    worker = running(services.worker_spec(tmp_path, app_settings))
    client = Celery("test", broker=redis_server.url, backend=redis_server.url)
    try:
        result = client.send_task("quill.ping", args=["hello"]).get(timeout=30)
    finally:
        client.close()
    assert result["pong"] == "hello"
    assert result["worker"].endswith(f":{worker.pid}")


def test_console_under_daphne_health_login_and_landing(tmp_path, app_settings, running):
    port = ports.free_port()
    running(services.console_spec(tmp_path, app_settings, port))
    base = f"http://127.0.0.1:{port}"

    with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
        assert response.status == 200
        assert json.load(response) == {"status": "ok"}

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/", timeout=10) as response:  # redirected to the login page
        assert response.url == f"{base}/accounts/login/?next=/"
        login_page = response.read().decode()
    assert "Log in" in login_page

    password = create_admin(tmp_path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
    form = {"username": "admin", "password": password, "csrfmiddlewaretoken": token, "next": "/"}
    request = urllib.request.Request(
        f"{base}/accounts/login/",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Referer": f"{base}/accounts/login/"},
    )
    with opener.open(request, timeout=10) as response:
        assert response.url == f"{base}/"
        assert 'id="brokers"' in response.read().decode()  # the cluster page's brokers table


# ------------------------------------------------------------ Django, in-process


@pytest.mark.django_db
def test_healthz_needs_no_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_landing_page_requires_login(client, django_user_model, settings, zookeeper):
    from console.roles import VIEWER, set_role

    settings.QUILL_ZOOKEEPER_CONNECT = zookeeper.address + "/quill-landing"
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"
    user = django_user_model.objects.create_user("ops", password="x")
    client.force_login(user)
    assert client.get("/").status_code == 403  # a login without a role sees nothing
    set_role(user, VIEWER)
    assert b'id="brokers"' in client.get("/").content  # the cluster page's brokers table


@pytest.mark.django_db
def test_createadmin_prints_a_password_once(django_user_model):
    first, second = StringIO(), StringIO()
    call_command("createadmin", stdout=first)
    call_command("createadmin", stdout=second)
    password = re.search(r"password: (\S+)", first.getvalue()).group(1)
    admin = django_user_model.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert password not in second.getvalue()
    assert "exists" in second.getvalue()
    assert django_user_model.objects.count() == 1


async def test_channel_layer_round_trip_over_redis(redis_server, settings):
    import asyncio

    from channels.layers import get_channel_layer

    from console.channel_layer import channel_layers

    settings.CHANNEL_LAYERS = channel_layers(redis_server.url)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "cluster.event", "text": "broker-1 up"})
    assert await layer.receive(channel) == {"type": "cluster.event", "text": "broker-1 up"}
    # A quiet channel keeps waiting past channels_redis's 5 s BZPOPMIN (redis-py 8's 5 s
    # default socket timeout used to end it with redis TimeoutError), then gets its message.
    waiting = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(7)
    assert not waiting.done(), waiting.exception()
    await layer.send(channel, {"type": "cluster.event", "text": "later"})
    assert (await asyncio.wait_for(waiting, 10))["text"] == "later"


def test_settings_come_from_env(tmp_path):
    env = {
        **child_env(services.redis_spec(tmp_path, 1)),
        "QUILL_STATE_DIR": str(tmp_path),
        "QUILL_REDIS_URL": "redis://10.0.0.9:7000/3",
        "QUILL_BOOTSTRAP_SERVERS": "b1:9092,b2:9092",
        "QUILL_DEBUG": "true",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    code = (
        "from django.conf import settings as s; import json; print(json.dumps([str(s.DATABASES"
        "['default']['NAME']), s.CELERY_BROKER_URL, s.CHANNEL_LAYERS['default']['CONFIG']"
        "['hosts'][0]['address'], s.QUILL_BOOTSTRAP_SERVERS, s.DEBUG]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        str(tmp_path / "console.sqlite3"),
        "redis://10.0.0.9:7000/3",
        "redis://10.0.0.9:7000/3",
        "b1:9092,b2:9092",
        True,
    ]
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
