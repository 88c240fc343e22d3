"""The web console in a real browser: headless Chromium driven by Selenium against a running
bridge (demo mode, on the in-process demo DDP server). Usage: console_test.py BRIDGE_URL ARTIFACTS_DIR

Every step waits (bounded) for what the page must show, and fails with what it showed instead.
Screenshots of the main states go to ARTIFACTS_DIR.
"""
import http.client
import json
import os
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

URL = sys.argv[1].rstrip("/")
ARTIFACTS = sys.argv[2]
os.makedirs(ARTIFACTS, exist_ok=True)
WAIT = 15
steps = []


def step(name):
    steps.append(name)
    print(f"browser: {name}", flush=True)


def make_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1000", "--no-first-run", "--disable-extensions"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


driver = make_driver()


def wait_for(what, condition, timeout=WAIT):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: condition())
    except TimeoutException:
        shot = os.path.join(ARTIFACTS, "failure.png")
        driver.save_screenshot(shot)
        raise AssertionError(f"{what}: not seen within {timeout} s (screenshot {shot}); page said: "
                             f"{driver.find_element(By.TAG_NAME, 'body').text[:1500]}")


def by_id(element_id):
    return driver.find_element(By.ID, element_id)


def text_of(element_id):
    return by_id(element_id).text


def press(element):
    """A real click, after scrolling the element clear of the sticky header."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def fill(element_id, value):
    element = by_id(element_id)
    element.clear()
    element.send_keys(value)


def rows():
    return driver.find_elements(By.CSS_SELECTOR, "#documents tbody tr")


def row_selector(doc_id):
    return f'#documents tbody tr[data-id=\'{json.dumps(doc_id)}\']'


def row_text(doc_id):
    """The text of a document's row, read in one go (the table is redrawn as changes arrive)."""
    return driver.execute_script("const r = document.querySelector(arguments[0]); return r ? r.innerText : null", row_selector(doc_id))


def flashed_fields(doc_id):
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' .field.flash')].map(e => e.dataset.field)", row_selector(doc_id))


def click_in_row(match, label):
    """Clicks a row's button, finding it again if the table was redrawn under the click."""
    for _ in range(20):
        try:
            for row in rows():
                if match(row.text):
                    press(row.find_element(By.XPATH, f".//button[text()='{label}']"))
                    return
        except StaleElementReferenceException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no row with a {label} button matched")


def session_token():
    cookie = driver.get_cookie("ddp_bridge_session")
    assert cookie, f"the session cookie is missing: {driver.get_cookies()}"
    assert cookie.get("httpOnly"), "the session cookie must be HttpOnly"
    return cookie["value"]


def rest(method, path, body=None, token=None):
    parsed = urllib.parse.urlparse(URL)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read().decode()
    connection.close()
    return response.status, dict(response.getheaders()), data


def script_errors():
    """Console messages that mean a broken page: script errors and Content-Security-Policy
    violations (the 4xx answers the steps provoke on purpose are logged too, and ignored)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]]


try:
    step("the page loads with nothing from outside the bridge, and says there is no session")
    status, headers, _ = rest("GET", "/")
    assert status == 200 and headers.get("Content-Security-Policy", "").startswith("default-src 'self'"), headers
    driver.get(URL + "/")
    wait_for("the no-session state", lambda: text_of("connection") == "no session")
    external = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith(location.origin))")
    assert external == [], f"resources from outside the bridge: {external}"

    step("log in as alice with a password")
    fill("login-user", "alice")
    fill("login-password", "secret")
    by_id("login-password").send_keys(Keys.ENTER)  # the keyboard submits the form
    wait_for("the connected state", lambda: text_of("connection") == "connected")
    wait_for("alice as the user", lambda: "alice" in text_of("user") or "user " in text_of("user"))
    token = session_token()

    step("subscribe to tasks and see it ready and its rows appear")
    fill("sub-name", "tasks")
    fill("sub-params", "[]")
    press(by_id("subscribe-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("the tasks subscription ready", lambda: any(
        "tasks" in li.text and "ready" in li.text for li in driver.find_elements(By.CSS_SELECTOR, "#subscriptions li")))
    wait_for("the tasks collection in the list", lambda: driver.find_elements(By.CSS_SELECTOR, '#collections button[data-collection="tasks"]'))
    press(driver.find_element(By.CSS_SELECTOR, '#collections button[data-collection="tasks"]'))
    wait_for("three task rows", lambda: len(rows()) == 3)
    assert "alice inbox task" in text_of("documents")
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(ARTIFACTS, "01-subscribed.png"))

    step("insert a document from the page and see its row")
    fill("editor", '{"text": "written in the browser", "listId": "inbox", "done": false}')
    press(by_id("save"))
    wait_for("the inserted row", lambda: "written in the browser" in text_of("documents"))
    wait_for("the insert confirmed", lambda: "Inserted" in text_of("editor-message"))
    wait_for("the collection count updated", lambda: "tasks (4)" in text_of("collections"))

    step("invalid JSON in the editor is refused with a reason, nothing sent")
    fill("editor", '{"text": oops}')
    wait_for("the JSON error", lambda: "not valid JSON" in text_of("editor-message"))
    assert by_id("editor").get_attribute("aria-invalid") == "true"
    press(by_id("save"))
    assert len(rows()) == 4

    step("a change made through REST shows up live, the changed field highlighted")
    status, _, body = rest("PATCH", "/v1/collections/tasks/task-a1", {"done": True, "text": "done elsewhere"}, token)
    assert status == 200, (status, body)
    wait_for("the changed row", lambda: "done elsewhere" in (row_text("task-a1") or ""))
    flashed = flashed_fields("task-a1")
    assert "text" in flashed and "done" in flashed, f"highlighted fields: {flashed}"
    driver.save_screenshot(os.path.join(ARTIFACTS, "02-live-change.png"))

    step("a selector filters the table")
    fill("q-selector", '{"text": "done elsewhere"}')
    press(by_id("query-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("one matching row", lambda: len(rows()) == 1 and "done elsewhere" in text_of("documents"))
    fill("q-selector", "")
    press(by_id("query-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("all rows again", lambda: len(rows()) == 4)

    step("edit a document from the page")
    click_in_row(lambda text: "bob inbox task" in text, "Edit")
    wait_for("the editor filled", lambda: "bob inbox task" in by_id("editor").get_attribute("value"))
    fill("editor", '{"$set": {"text": "edited in the browser"}}')
    press(by_id("save"))
    wait_for("the edited row", lambda: "edited in the browser" in (row_text("task-b1") or ""))

    step("remove the inserted document from the page")
    click_in_row(lambda text: "written in the browser" in text, "Remove")
    wait_for("the row gone", lambda: "written in the browser" not in text_of("documents") and len(rows()) == 3)

    step("call a method and see its result")
    fill("method-name", "echo")
    fill("method-params", '["hello", 42]')
    press(by_id("method-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("the method result", lambda: '"hello"' in text_of("method-output") and "42" in text_of("method-output"))
    assert "error" not in by_id("method-output").get_attribute("class")

    step("an error is rendered with its status, error and reason")
    fill("method-name", "boom")
    fill("method-params", "[]")
    press(by_id("method-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("the method error", lambda: "status: 4" in text_of("method-output") and "reason:" in text_of("method-output"))
    assert "error" in by_id("method-output").get_attribute("class")
    fill("sub-name", "failing")
    press(by_id("subscribe-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_for("the failing subscription's error", lambda: any(
        "failing" in li.text and "error" in li.text and "not-authorized" in li.text
        for li in driver.find_elements(By.CSS_SELECTOR, "#subscriptions li")))
    driver.save_screenshot(os.path.join(ARTIFACTS, "03-errors.png"))

    step("the event log shows raw events with their ids, and pauses")
    entries = driver.execute_script("return [...document.querySelectorAll('#event-log li')].map(e => [e.dataset.event, e.innerText])")
    assert any(event == "changed" and text.startswith("#") for event, text in entries), entries[:5]
    press(by_id("pause-log"))
    before = len(driver.find_elements(By.CSS_SELECTOR, "#event-log li"))
    rest("PATCH", "/v1/collections/tasks/task-a2", {"text": "while paused"}, token)
    wait_for("the table still live while the log is paused", lambda: "while paused" in text_of("documents"))
    wait_for("held events counted", lambda: "held" in text_of("log-info") and not text_of("log-info").startswith("paused, 0"))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#event-log li")) == before
    press(by_id("pause-log"))
    wait_for("held events shown", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#event-log li")) > before)

    step("the page follows the system's dark theme and fits a phone-width screen")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    dark = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert dark != "rgb(247, 247, 248)", f"the dark theme did not apply: {dark}"
    driver.save_screenshot(os.path.join(ARTIFACTS, "04-dark.png"))
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    driver.set_window_size(390, 900)
    time.sleep(0.3)
    overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a phone screen"
    driver.save_screenshot(os.path.join(ARTIFACTS, "05-phone.png"))
    driver.set_window_size(1280, 1000)

    step("every control has a label")
    unlabelled = driver.execute_script("""
        return [...document.querySelectorAll('input, textarea, button')].filter(el => {
            if (el.labels && el.labels.length) return false;
            return !(el.getAttribute('aria-label') || el.textContent.trim());
        }).map(el => el.id || el.outerHTML.slice(0, 60));""")
    assert unlabelled == [], f"controls without a label: {unlabelled}"

    step("log out: the session stays, anonymous; end it: no session")
    press(by_id("logout"))
    wait_for("anonymous", lambda: text_of("user") == "anonymous")
    press(by_id("end-session"))
    wait_for("no session", lambda: text_of("connection") == "no session")

    step("sign up a new user from the page")
    fill("login-user", f"browser{int(time.time() * 1000) % 1000000}")
    fill("login-password", "a-long-password")
    press(by_id("signup"))
    wait_for("signed up and connected", lambda: "Signed up" in text_of("session-message") and text_of("connection") == "connected")
    wait_for("the new user shown", lambda: text_of("user").startswith("user "))

    errors = script_errors()
    assert errors == [], f"the browser console reported errors: {errors}"
    print(f"browser: {len(steps)} steps passed; screenshots in {ARTIFACTS}")
finally:
    driver.quit()
