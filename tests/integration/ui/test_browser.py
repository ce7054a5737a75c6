"""The web UI in Debian's headless Chromium (Selenium, chromium-driver) against the real thing.

A real coordinator (uvicorn on 127.0.0.1, its own lifespan and dispatcher), a real worker
(in-process), the session's redis-server and the testbed's clusters, and a git server over
HTTP. The test does what a new user does: sign in, see the apps with their health, open one,
unfold its Deployment's ReplicaSet and Pods, see the diff of a new commit, press Sync and watch
the status change without the page reloading, open the sync's history entry and waterfall,
then sign in as a viewer and find no Sync button. Each page's screenshot is saved under the
test's output folder (`tmp_path / "screenshots"`), or GITFLEET_UI_SCREENSHOTS when set.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from api.app import create_app
from api.settings import Settings
from fleet.control.registry.records import Role
from tests.support.fleet import INSECURE_GIT_HOSTS, FleetEnv

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ADMIN_TOKEN = "gf_browser-test-admin-token-0123456789"
WAIT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def coordinator(fleet: FleetEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The coordinator served by uvicorn on 127.0.0.1; yields its base URL."""
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "coordinator-cache"))
    settings = Settings(
        redis_url=fleet.redis_url,
        admin_token=SecretStr(ADMIN_TOKEN),
        secret_key=SecretStr(fleet.secret_key),
        prefix=fleet.prefix,
        insecure_git_hosts=INSECURE_GIT_HOSTS,
        admin_token_file=tmp_path / "admin-token",
    )
    port = _free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="coordinator", daemon=True)
    thread.start()
    WebDriverWait(server, 30, poll_frequency=0.1).until(lambda s: s.started)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """Debian's Chromium, headless, driven by its own chromium-driver (the Makefile installs
    both); run as root here, hence --no-sandbox."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"install Debian's chromium and chromium-driver (make deps): {missing}"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # to read the console
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("GITFLEET_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sign_in(driver: WebDriver, base: str, token: str) -> None:
    driver.get(f"{base}/ui/")
    field = WebDriverWait(driver, WAIT_S).until(ready.presence_of_element_located((By.ID, "token")))
    assert "/ui/login" in driver.current_url
    field.send_keys(token)
    field.submit()
    WebDriverWait(driver, WAIT_S).until(ready.presence_of_element_located((By.ID, "apps")))


def _text(driver: WebDriver, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def test_a_user_signs_in_inspects_diffs_syncs_and_reads_the_waterfall_in_a_browser(
    fleet: FleetEnv,
    coordinator: str,
    browser: WebDriver,
    shots: Path,
    spans: InMemorySpanExporter,  # the OpenTelemetry SDK, so syncs get real trace ids
) -> None:
    cluster = sorted(fleet.clusters)[0]
    app = fleet.app_name(0)
    first = fleet.commit_apps([app])
    fleet.add_app(app, cluster)
    fleet.worker_thread("ui-worker")
    answer = fleet.sync_and_wait(app, cluster)
    assert not answer.get("error"), answer
    viewer = fleet.store.create_token("ui-viewer", Role.VIEWER)
    wait = WebDriverWait(browser, WAIT_S, poll_frequency=0.25)

    # Sign in; the apps table shows the app with its health.
    _sign_in(browser, coordinator, ADMIN_TOKEN)
    row = f'tr[data-app="{app}"]'
    wait.until(lambda d: _text(d, f'{row} [data-field="sync_status"]') == "Synced")
    health = _text(browser, f'{row} [data-field="health"]')
    assert health in ("Healthy", "Progressing")
    assert _text(browser, f'{row} [data-field="revision"]') == first[:8]
    browser.save_screenshot(str(shots / "apps.png"))

    # Open the app: its objects, and the Deployment's ReplicaSet and Pod read from the cluster.
    browser.find_element(By.LINK_TEXT, app).click()
    wait.until(ready.presence_of_element_located((By.ID, "app-status")))
    objects = {
        e.get_attribute("data-ref") for e in browser.find_elements(By.CSS_SELECTOR, "tr[data-ref]")
    }
    assert {f"ConfigMap/{app}/settings", f"Deployment/{app}/web"} <= objects
    deployment = browser.find_element(By.CSS_SELECTOR, f'tr[data-ref="Deployment/{app}/web"]')
    deployment.find_element(By.CSS_SELECTOR, "button[data-children]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.child.depth-1"))
    kinds = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "tr.child td:first-child")]
    assert any("ReplicaSet" in k for k in kinds) and any("Pod" in k for k in kinds), kinds
    browser.save_screenshot(str(shots / "app.png"))
    browser.find_element(By.LINK_TEXT, "settings").click()
    manifest = wait.until(ready.presence_of_element_located((By.ID, "live-manifest")))
    assert "k: v1" in manifest.text and "In sync" in browser.page_source
    browser.save_screenshot(str(shots / "object.png"))
    browser.back()
    wait.until(ready.presence_of_element_located((By.LINK_TEXT, "Diff with git")))

    # A new commit: the diff with git shows the change, object by object.
    second = fleet.commit_apps([app], data="k: v2")
    browser.find_element(By.LINK_TEXT, "Diff with git").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "pre.diff")))
    diff = _text(browser, "pre.diff")
    assert "-  k: v1" in diff and "+  k: v2" in diff, diff
    browser.save_screenshot(str(shots / "diff.png"))

    # Sync from the app page: the status changes in place, without a reload.
    browser.back()
    wait.until(ready.presence_of_element_located((By.ID, "sync-button")))
    browser.execute_script("window.__notReloaded = true;")
    browser.find_element(By.XPATH, "//button[text()='Refresh']").click()
    wait.until(ready.alert_is_present()).accept()
    wait.until(lambda d: "refreshed:" in _text(d, "#notice"))
    assert f"a sync would change ConfigMap/{app}/settings (configured)" in _text(browser, "#notice")
    browser.find_element(By.ID, "sync-button").click()
    wait.until(ready.alert_is_present()).accept()
    wait.until(lambda d: "sync requested" in _text(d, "#notice"))
    instance = f'section[data-cluster="{cluster}"] p [data-field="revision"]'
    wait.until(lambda d: _text(d, instance) == second[:8])
    assert browser.execute_script("return window.__notReloaded === true;")
    browser.save_screenshot(str(shots / "synced.png"))

    # History: the newest entry, its waterfall and its trace id.
    browser.find_element(By.LINK_TEXT, "History").click()
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "table.history")))
    browser.find_element(By.CSS_SELECTOR, "table.history tbody tr td a").click()
    wait.until(ready.presence_of_element_located((By.ID, "waterfall")))
    stages = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#waterfall .stage")]
    assert {"source", "render", "diff", "apply"} <= set(stages), stages
    trace_id = _text(browser, "#trace-id")
    assert len(trace_id) == 32
    assert trace_id in {format(s.context.trace_id, "032x") for s in spans.get_finished_spans()}
    assert second in browser.page_source
    browser.save_screenshot(str(shots / "history-entry.png"))

    # A viewer sees the app but no button that would change it.
    browser.find_element(By.CSS_SELECTOR, "form[action='/ui/logout'] button").click()
    _sign_in(browser, coordinator, viewer)
    browser.get(f"{coordinator}/ui/apps/{app}")
    wait.until(ready.presence_of_element_located((By.ID, "app-status")))
    assert not browser.find_elements(By.ID, "sync-button")
    buttons = [b.text for b in browser.find_elements(By.TAG_NAME, "button")]
    assert not {"Sync", "Refresh", "Delete"} & set(buttons), buttons
    browser.save_screenshot(str(shots / "viewer-app.png"))
    browser.set_window_size(390, 844)  # a phone: the page fits its width, tables scroll alone
    browser.refresh()
    wait.until(ready.presence_of_element_located((By.ID, "app-status")))
    overflow = "return document.documentElement.scrollWidth - window.innerWidth;"
    assert browser.execute_script(overflow) <= 0
    browser.save_screenshot(str(shots / "phone-app.png"))
    browser.set_window_size(1280, 1000)
    browser.get(f"{coordinator}/ui/clusters")
    wait.until(ready.presence_of_element_located((By.ID, "clusters")))
    browser.save_screenshot(str(shots / "clusters.png"))
    assert len(list(shots.glob("*.png"))) >= 9
    # No script error, refused resource or Content-Security-Policy violation on any page.
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
