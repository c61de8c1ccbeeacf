"""The Alerts page in Debian's chromium against the console under daphne (one broker):
create a rule with the form, test-fire it to a real webhook listener, edit it, and
delete it after the confirm dialog. Screenshots go to test-output/console/alerts-*.png."""

from __future__ import annotations

import pytest

from tests.console_helpers import OUT, chromium_page, console_stack, log_in
from tests.ops_helpers import unique
from tests.wait_helpers import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers", "tests.webhook_helpers"]


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    state = tmp_path_factory.mktemp("console-alerts")
    # the test's webhook listens on loopback: an admin's allowance (alerts.webhook)
    allow = {"QUILL_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    with console_stack(cluster_factory(1), redis_server, state, 8, **allow) as (url, password):
        with chromium_page(OUT) as page:
            log_in(page, url, password)
            yield {"url": url, "page": page}


def test_create_test_fire_edit_and_delete_in_the_browser(stack, webhook):
    page, url = stack["page"], stack["url"]
    hook, received = webhook
    group = unique("orders")
    page.goto(f"{url}/groups/")  # the rules are a page of the groups tab
    page.click("#alert-rules-link")
    page.wait_for_url(f"{url}/alerts/")
    assert page.locator("header.bar nav a.on").inner_text() == "Consumer groups"
    page.fill("#alert-form input[name=name]", "orders stuck")
    page.fill("#alert-form input[name=group]", group)
    page.fill("#alert-form input[name=max_lag_ms]", "soon")
    page.fill("#alert-form input[name=webhook_url]", hook + "?token=SECRET")
    page.check("#alert-form input[value=STOP]")
    page.click("#alert-form button[type=submit]")
    error = page.locator("#alert-form .field-error")
    error.wait_for()
    assert "whole number of milliseconds" in error.inner_text()
    assert page.input_value("#alert-form input[name=max_lag_ms]") == "soon"  # kept
    assert page.is_checked("#alert-form input[value=STOP]")
    page.fill("#alert-form input[name=max_lag_ms]", "120000")
    page.click("#alert-form button[type=submit]")
    row = page.locator("#alert-rules tbody tr", has_text="orders stuck")
    row.wait_for()
    assert "SECRET" not in row.inner_text() and "2 min 0 s" in row.inner_text()

    row.locator("button:has-text('test fire')").click()
    page.locator(".messages li", has_text="Test sent: webhook delivered.").wait_for()
    wait_until(lambda: len(received) == 1, 30, "the test notification")
    assert received[0]["event"] == "test" and received[0]["group"] == group
    assert (
        "test — webhook delivered"
        in page.locator("#alert-rules tbody tr", has_text=group).inner_text()
    )
    page.screenshot(path=str(OUT / "alerts-list.png"), full_page=True)

    row.locator("a:has-text('edit')").click()
    assert page.input_value("#alert-form input[name=group]") == group
    page.fill("#alert-form input[name=max_lag_ms]", "")
    page.check("#alert-form input[value=ERR]")
    page.screenshot(path=str(OUT / "alerts-edit.png"), full_page=True)
    page.click("#alert-form button:has-text('Save rule')")
    page.locator(".messages li", has_text="Saved the rule.").wait_for()
    row = page.locator("#alert-rules tbody tr", has_text=group)
    assert "ERR" in row.inner_text() and "2 min" not in row.inner_text()

    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    row.locator("button:has-text('delete')").click()
    page.wait_for_timeout(500)  # a dismissed confirm submits nothing
    assert asked == [f"Delete the alert rule orders stuck on {group}? Its history goes with it."]
    assert row.count() == 1
    page.once("dialog", lambda d: d.accept())
    row.locator("button:has-text('delete')").click()
    page.locator(".messages li", has_text="Deleted the rule.").wait_for()
    assert page.locator("#alert-rules tbody tr", has_text=group).count() == 0
