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
from datetime import datetime, timedelta, timezone
from concurrent.futures import ThreadPoolExecutor

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


def wait_for(what, condition, timeout=WAIT, detail=None):
    """Waits until condition() holds; on failure, says what the page showed (or detail())."""
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: condition())
    except TimeoutException:
        shot = os.path.join(ARTIFACTS, "failure.png")
        driver.save_screenshot(shot)
        shown = detail() if detail else driver.find_element(By.TAG_NAME, "body").text[:1500]
        raise AssertionError(f"{what}: not seen within {timeout} s (screenshot {shot}); page said: {shown}")


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


def apply_query(selector, sort, limit):
    fill("q-selector", selector)
    fill("q-sort", sort)
    fill("q-limit", str(limit))
    press(by_id("query-form").find_element(By.CSS_SELECTOR, "button[type=submit]"))


def table_rows():
    """The rows the table shows (not those fading out): each document's _id and its `n` as shown."""
    return driver.execute_script("""
        return [...document.querySelectorAll('#documents tbody tr:not(.removed)')].map(r => {
            const n = r.querySelector('[data-field=n]');
            return [JSON.parse(r.dataset.id), n ? n.textContent.replace(/^n: /, '') : null];
        })""")


def rest_page(token, selector, sort, skip, limit):
    """The same view as the REST API answers it: [[_id, n as JSON]], and the count."""
    query = urllib.parse.urlencode({"selector": selector, "sort": sort, "skip": skip, "limit": limit})
    status, _, body = rest("GET", f"/v1/collections/tasks?{query}", token=token)
    assert status == 200, (status, body)
    answer = json.loads(body)
    return [[d["_id"], shown(d["n"]) if "n" in d else None] for d in answer["documents"]], answer["count"]


def shown(value):
    """A value as the table shows it: a date in ISO 8601, anything else as compact JSON."""
    if isinstance(value, dict) and list(value) == ["$date"] and isinstance(value["$date"], (int, float)):
        date = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=value["$date"])
        return date.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# Values of every EJSON type class, and the pairs Minimongo's order (the bridge's) must get right:
# two +Infinity (unordered against each other: a tie, in arrival order), canonically equivalent
# strings (different UTF-16 code units: ordered), an escaped object and a custom type (an object
# {$type, $value} to Minimongo), binary by length first, arrays (a sort key takes their least
# element ascending, their greatest descending; an empty one is a missing value), an array of
# objects (`n.a` reaches into each) and an array inside an array (compared as an array). One
# regular expression only: two have no order (Minimongo throws, the bridge answers 400). Not NaN:
# it is unordered against every number, so no order is total and each side's sort algorithm
# decides where it lands.
MIXED = [None, -3, 1.5, 0, {"$InfNaN": -1}, {"$InfNaN": 1}, "x", "X", "\u00e9", "e\u0301", "\U0001F600", "\ue000",
         {"a": 1}, {"a": 1, "b": 2}, {"b": 0}, {"$escape": {"$date": "x"}}, {"$type": "point", "$value": [1, 2]}, [1, 2], [1], [],
         {"$binary": "AQI="}, {"$binary": "AAA="}, {"$binary": "AQ=="}, {"$type": "oid", "$value": "0123456789abcdef01234567"},
         True, False, {"$date": 5}, {"$date": -5}, {"$regexp": "a.c", "$flags": "i"}, {"$InfNaN": 1},
         [{"a": 3}, {"a": -1}], [[1, 2]], [5, "x", None]]
# Ids whose order differs between UTF-16 code units (Minimongo's and JavaScript's, so the bridge's
# sort) and Unicode scalars (Swift's String order); several tie on `n` (arrival order decides).
MIXED_IDS = ["mix-\U0001F600", "mix-\ue000", "mix-A", "mix-a", "-mix"]


COUNT_REQUESTS = """
    window.restCalls = [];
    const original = window.fetch;
    window.fetch = function (input, init) {
        window.restCalls.push(`${(init && init.method) || "GET"} ${input}`);
        return original.apply(this, arguments);
    };
    performance.setResourceTimingBufferSize(10000);
    performance.clearResourceTimings();"""

REQUESTS_MADE = """
    return [window.restCalls,
            performance.getEntriesByType('resource').filter(e => e.initiatorType === 'fetch').map(e => e.name)]"""


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
    # Fields the demo's toggler (task-a1's `done`, every 5 s) never touches, so both do change.
    status, _, body = rest("PATCH", "/v1/collections/tasks/task-a1", {"text": "done elsewhere", "note": "from REST"}, token)
    assert status == 200, (status, body)
    wait_for("the changed row", lambda: "done elsewhere" in (row_text("task-a1") or ""))
    flashed = flashed_fields("task-a1")
    assert "text" in flashed and "note" in flashed, f"highlighted fields: {flashed}"
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

    step("200 documents inserted, then changed quickly through REST: the table ends right, and the page made no reload storm")
    selector, sort, limit = '{"batch": "bulk"}', '{"n": -1}', 25
    apply_query(selector, sort, limit)
    wait_for("the empty bulk view", lambda: text_of("documents-caption") == "tasks: 0 matching documents")
    driver.execute_script(COUNT_REQUESTS)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        inserted = list(pool.map(lambda i: rest("POST", "/v1/collections/tasks", {"_id": f"bulk-{i:03}", "batch": "bulk", "n": i}, token),
                                 range(200)))
        assert all(status in (200, 201) for status, _, _ in inserted), [r[0] for r in inserted if r[0] not in (200, 201)][:3]

        def change(i):
            doc = f"/v1/collections/tasks/bulk-{i:03}"
            if i % 25 == 1:
                return rest("DELETE", doc, token=token)
            if i % 10 == 0:
                return rest("PATCH", doc, {"batch": "moved-out"}, token)  # leaves the view
            # Reorders it, with ties: those keep the order the documents arrived in, the same in the
            # page as in the bridge because the view was open (and live) before the first insert.
            return rest("PATCH", doc, {"n": (i * 7) % 23, "note": f"changed {i}"}, token)

        changed = list(pool.map(change, range(200)))
        assert all(status == 200 for status, _, _ in changed), [(r[0], r[2]) for r in changed if r[0] != 200][:3]
    writes = time.monotonic() - started
    expected, count = rest_page(token, selector, sort, 0, limit)
    assert count == 200 - 8 - 20, count
    wait_for("the first page as the REST API answers it", lambda: table_rows() == expected, timeout=30,
             detail=lambda: f"\n  page: {table_rows()}\n  REST: {expected}")
    assert text_of("documents-caption") == f"tasks: {count} matching documents", text_of("documents-caption")
    press(by_id("next-page"))
    expected, _ = rest_page(token, selector, sort, limit, limit)
    wait_for("the second page as the REST API answers it", lambda: table_rows() == expected,
             detail=lambda: f"\n  page: {table_rows()}\n  REST: {expected}")
    _, _, body = rest("GET", "/v1/collections", token=token)
    tasks = next(c["count"] for c in json.loads(body) if c["name"] == "tasks")
    wait_for("the collection's count", lambda: f"tasks ({tasks})" in text_of("collections"))
    calls, fetched = driver.execute_script(REQUESTS_MADE)
    print(f"browser: 400 writes in {writes:.1f} s; REST requests the page made meanwhile: {len(calls)} {calls} "
          f"(resource timing: {len(fetched)})", flush=True)
    # The table and the counts come from the event streams: no document or collection is read by REST
    # (the console before this made a debounced reload of the view and the counts, and one per page).
    reads = [call for call in calls if "/v1/collections" in call]
    assert reads == [] and len(calls) <= 2 and len(fetched) <= 2, f"the page made {len(calls)} requests: {calls}"
    apply_query("", "", 20)
    wait_for("the whole collection again", lambda: text_of("documents-caption") == f"tasks: {tasks} matching documents")

    step("a sort over values of every EJSON type orders the table as the REST API does")
    docs = [{"_id": f"mix-{i:02}", "batch": "mix", "n": value} for i, value in enumerate(MIXED)]
    docs += [{"_id": doc_id, "batch": "mix", "n": 7} for doc_id in MIXED_IDS] + [{"_id": "mix-none", "batch": "mix"}]
    selector = '{"batch": "mix"}'
    # The view is open before the documents are written: ties keep the order the documents
    # arrived in, and the page's copy holds them in the bridge's arrival order when it receives
    # them live (a snapshot lists them in the order of the bridge's map, not of their arrival).
    # The sorts below keep the selector, so the view (and its copy) stays the same.
    apply_query(selector, "", 50)
    wait_for("the empty mix view", lambda: text_of("documents-caption") == "tasks: 0 matching documents")
    for doc in docs:
        status, _, body = rest("POST", "/v1/collections/tasks", doc, token)
        assert status in (200, 201), (status, body, doc)
    wait_for("every mix document in the view", lambda: text_of("documents-caption") == f"tasks: {len(docs)} matching documents")
    for sort in ['{"n": 1}', '{"n": -1}', '[["n", "desc"], ["_id", "asc"]]', '{"_id": -1}', "", '{"n.a": -1, "n": 1}',
                 '{"n.0": 1}', '[["n", 0], ["_id", 2]]']:
        apply_query(selector, sort, 50)
        expected, count = rest_page(token, selector, sort, 0, 50)
        assert count == len(docs), count
        wait_for(f"the order of sort {sort or '(none)'}", lambda: table_rows() == expected,
                 detail=lambda: f"\n  page: {table_rows()}\n  REST: {expected}")

    step("a sort the documents refuse (parallel arrays) is an error on the page as in the REST API")
    sort = '{"n": 1, "n.0": 1}'
    status, _, body = rest("GET", f"/v1/collections/tasks?{urllib.parse.urlencode({'selector': selector, 'sort': sort})}", token=token)
    assert status == 400 and "parallel arrays" in body, (status, body)
    apply_query(selector, sort, 50)
    wait_for("the sort's error", lambda: text_of("query-message") == "Sort: cannot sort by parallel arrays (n, n.0)" and rows() == [],
             detail=lambda: f"message {text_of('query-message')!r}, {len(rows())} rows")
    assert by_id("q-sort").get_attribute("aria-invalid") == "true"
    apply_query("", "", 20)
    wait_for("the error gone", lambda: text_of("query-message") == "" and by_id("q-sort").get_attribute("aria-invalid") == "false")

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
