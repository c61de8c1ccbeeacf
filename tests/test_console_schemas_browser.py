"""Avro and Protobuf display in Debian's chromium (issue 29), as an operator sees it: the
console under daphne with a schema registry, wire-format records decoded with their
badges on the Messages page and in the search, a schema uploaded through the form, a
.proto that does not compile kept in the form with the reason; screenshots."""

from __future__ import annotations

import json

import pytest

from tests.console_helpers import OUT, console_stack, log_in, unique
from tests.schema_helpers import (
    AVRO_USER,
    SHOP_PROTO,
    Registry,
    avro_bytes,
    produce,
    proto_classes,
    wire,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers"]  # the chromium `page` fixture


@pytest.fixture(scope="module")
def registry():
    reg = Registry(
        {
            7: {"schema": json.dumps(AVRO_USER), "schemaType": "AVRO"},
            8: {"schema": SHOP_PROTO, "schemaType": "PROTOBUF"},
        }
    )
    yield reg
    reg.close()


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory, registry):
    cluster = cluster_factory(1)
    state = tmp_path_factory.mktemp("console-schemas")
    extra = {"QUILL_SCHEMA_REGISTRY_URL": registry.url}
    with console_stack(cluster, redis_server, state, 12, **extra) as (url, password):
        yield {"cluster": cluster, "url": url, "password": password}


@pytest.fixture(scope="module")
def topics(stack):
    classes = proto_classes(SHOP_PROTO, ["shop.Order"])
    order = classes["shop.Order"](id="o-77", cents=990, lines=[{"sku": "teapot", "qty": 1}])
    bootstrap = stack["cluster"].bootstrap
    wired, raw = unique("orders-wire"), unique("users-raw")
    produce(
        bootstrap,
        wired,
        [
            (b"user-1", wire(7, avro_bytes(AVRO_USER, {"name": "alice", "visits": 3}))),
            (b"order-77", wire(8, order.SerializeToString(), b"\x02\x02")),
            (b"ghost", wire(42, b"\x02")),
        ],
    )
    produce(bootstrap, raw, [(b"u", avro_bytes(AVRO_USER, {"name": "dora", "visits": 12}))])
    return wired, raw


def shot(page, name: str) -> None:
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def badges(page) -> list[str]:
    return page.eval_on_selector_all(
        "#records .schema-badge, #search-results .schema-badge", "bs => bs.map(b => b.textContent)"
    )


def test_decoded_records_upload_and_search(stack, topics, page):
    wired, raw = topics
    url = stack["url"]
    log_in(page, url, stack["password"])
    page.goto(f"{url}/messages/?topic={wired}&partition=0&mode=offset&value=0")
    assert badges(page) == ["Avro, schema 7", "Protobuf shop.Order, schema 8", "schema 42"]
    decoded = page.eval_on_selector_all("#records pre.decoded", "ps => ps.map(p => p.textContent)")
    assert json.loads(decoded[0]) == {"name": "alice", "visits": 3}
    assert json.loads(decoded[1])["lines"] == [{"sku": "teapot", "qty": 1}]
    assert "schema 42: not in the registry (404)" in page.text_content("#records")
    assert registry_line(page).startswith("Schema registry: http://127.0.0.1:")
    shot(page, "60-messages-avro-protobuf")

    # a raw topic: upload its value schema through the form; a bad .proto first
    page.goto(f"{url}/messages/?topic={raw}&partition=0&mode=offset&value=0")
    assert badges(page) == []
    page.select_option("#schema-form select[name=kind]", "protobuf")
    page.fill("#schema-form textarea[name=schema]", "message User { strin name = 1; }")
    page.click("#schema-form button[type=submit]")
    page.wait_for_selector("#schema-form .field-error")
    assert "does not compile" in page.text_content("#schema-form .field-error")
    assert page.input_value("#schema-form textarea[name=schema]") == (
        "message User { strin name = 1; }"
    )
    shot(page, "61-schema-upload-error")
    assert page.input_value("#schema-form select[name=part]") == "value"  # the default
    page.select_option("#schema-form select[name=kind]", "avro")
    page.fill("#schema-form textarea[name=schema]", json.dumps(AVRO_USER, indent=2))
    page.click("#schema-form button[type=submit]")
    page.wait_for_selector("#records .schema-badge")
    assert badges(page) == ["Avro (value schema)"]
    assert json.loads(page.text_content("#records pre.decoded")) == {"name": "dora", "visits": 12}
    assert "Avro" in page.text_content("#topic-schemas")
    shot(page, "62-schema-uploaded")

    # the search filters on the decoded JSON
    page.goto(f"{url}/messages/search?topic={wired}")
    page.wait_for_selector("#search-status:has-text('done')")
    page.fill("input[name=value]", '"sku": "teapot"')
    page.click("#search-run")
    page.wait_for_selector("#search-status:has-text('matched 1 · done')")
    assert badges(page) == ["Protobuf shop.Order, schema 8"]
    shot(page, "63-search-decoded")


def registry_line(page) -> str:
    return page.text_content("#registry-line").strip()
