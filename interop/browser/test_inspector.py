"""`a2a inspect` in a real headless Chromium (Selenium WebDriver).

Each test starts the bundled agents with `a2a serve` and the inspector
with `a2a inspect` on loopback, drives the page as a person would (clicks,
typing, file uploads), asserts what the page shows, and saves a screenshot
of each view to $A2A_INSPECT_SCREENSHOTS (default
target/inspect-screenshots).
"""

import os
import re
import subprocess
import pathlib

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
A2A = os.environ.get("A2A_BIN", str(REPO / "target" / "debug" / "a2a"))
SHOTS = pathlib.Path(os.environ.get("A2A_INSPECT_SCREENSHOTS", REPO / "target" / "inspect-screenshots"))
FIXTURE = REPO / "crates" / "agentwire-agents" / "fixtures" / "npm" / "payment-service"
KEYS = REPO / "crates" / "agentwire-types" / "tests" / "fixtures" / "keys"
WAIT = 30


class Proc:
    """An `a2a` process whose first line names its URL; stopped by stop()."""

    def __init__(self, *args, cwd=None):
        self.p = subprocess.Popen([A2A, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd)
        line = self.p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not m:
            self.stop()
            raise RuntimeError(f"no URL in {line!r}")
        self.url = m.group(0)

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()


@pytest.fixture
def procs(tmp_path):
    started = []

    def start(*args):
        p = Proc(*args, cwd=tmp_path)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        p.stop()


@pytest.fixture
def browser():
    o = Options()
    o.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1300", "--disable-gpu"]:
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=o)
    d.set_page_load_timeout(WAIT)
    yield d
    d.quit()


def shot(d, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"{name}.png"))


def wait(d, cond, what):
    """Until cond() holds; an element replaced while cond() reads it (the
    page re-renders a view) is read again at the next try."""
    return WebDriverWait(d, WAIT, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda _: cond(), message=what
    )


def tab(d, name):
    d.find_element(By.ID, f"tab-{name}").click()


def open_inspector(d, procs, *args):
    insp = procs("inspect", *args)
    d.get(insp.url + "/")
    wait(d, lambda: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "the page started")
    return insp


def connect(d, url, binding=""):
    tab(d, "connect")
    box = d.find_element(By.ID, "agent")
    box.clear()
    box.send_keys(url)
    if binding:
        d.find_element(By.CSS_SELECTOR, f"#binding option[value='{binding}']").click()
    d.find_element(By.ID, "connect").click()
    wait(d, lambda: binding in d.find_element(By.ID, "status").text, f"connected via {binding}")


def send(d, text, msgid="", files=(), stream=True):
    tab(d, "chat")
    if msgid or files:
        det = d.find_element(By.CSS_SELECTOR, "#chat-form details")
        if not det.get_attribute("open"):
            det.find_element(By.TAG_NAME, "summary").click()
        m = d.find_element(By.ID, "chat-msgid")
        m.clear()
        m.send_keys(msgid)
        for f in files:
            d.find_element(By.ID, "chat-files").send_keys(str(f))
    s = d.find_element(By.ID, "chat-stream")
    if s.is_selected() != stream:
        s.click()
    d.find_element(By.ID, "chat-text").send_keys(text)
    d.find_element(By.ID, "send").click()
    wait(d, lambda: d.find_element(By.ID, "send").is_enabled(), "the call ended")


def states(d):
    return d.execute_script("return [...document.querySelectorAll('#chat-log .state')].map(e => e.dataset.state)")


def texts(d, css):
    """The text of each element matching css, read at once (the page redraws)."""
    return d.execute_script("return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", css)


def test_card_connected_and_validated(browser, procs):
    agent = procs("serve", "--agent", "conformance", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs, "-a", agent.url)
    # With -a the card is shown without a click.
    wait(d, lambda: d.find_elements(By.ID, "card-name"), "the card shown")
    assert d.find_element(By.ID, "card-name").text == "A2A Rust Conformance Agent"
    assert "Valid" in d.find_element(By.ID, "card-valid").text
    body = d.find_element(By.ID, "card").text
    for want in ["JSONRPC", "HTTP+JSON", "GRPC", "Conformance scenarios", "tck-complete-task", "streaming: true"]:
        assert want in body, want
    shot(d, "connect")
    # The keyboard moves between the views (arrow keys on the tabs).
    d.find_element(By.ID, "tab-connect").send_keys("\ue014")  # ArrowRight
    wait(d, lambda: d.find_element(By.ID, "view-chat").is_displayed(), "the chat view by keyboard")
    d.find_element(By.ID, "tab-chat").send_keys("\ue012")  # ArrowLeft
    wait(d, lambda: d.find_element(By.ID, "view-connect").is_displayed(), "back by keyboard")
    # A narrow window: the card still fits, nothing wider than the window.
    d.set_window_size(420, 1000)
    assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot(d, "connect-narrow")
    d.set_window_size(1100, 1300)
    # An address with no agent: the problem is named, the page keeps working.
    connect_err = d.find_element(By.ID, "agent")
    connect_err.clear()
    connect_err.send_keys("127.0.0.1:1")
    d.find_element(By.ID, "connect").click()
    wait(d, lambda: d.find_element(By.ID, "connect-error").is_displayed(), "the error shown")
    assert "Error" in d.find_element(By.ID, "connect-error").text
    shot(d, "connect-error")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_input_required_then_streamed_report(browser, procs, binding):
    agent = procs("serve", "--agent", "depcompat", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs)
    connect(d, agent.url, binding)
    send(d, "Check whether payment-service can move to the new runtime",
         files=[FIXTURE / "package.json", FIXTURE / "package-lock.json"])
    wait(d, lambda: d.find_element(By.ID, "prompt").is_displayed(), "the agent's question")
    assert "Node.js" in d.find_element(By.ID, "prompt").text
    assert d.find_element(By.ID, "chat-task").get_attribute("value"), "the reply continues the task"
    shot(d, f"chat-input-required-{binding.replace('+', '')}")
    send(d, "Node.js 24")
    wait(d, lambda: "completed" in states(d), "the task completed")
    log = d.find_element(By.ID, "chat-log").text
    assert "Dependency compatibility report" in log
    assert "compatibility-report.md" in log
    # The Markdown report with simple formatting: headings, no markers.
    assert d.find_elements(By.CSS_SELECTOR, "#chat-log .md h4")
    assert d.find_elements(By.CSS_SELECTOR, "#chat-log .md table td")
    shot(d, f"chat-report-{binding.replace('+', '')}")

    tab(d, "timeline")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#timeline li.final"), "the final state marked")
    tl = d.find_element(By.ID, "timeline").text
    assert "artifact" in tl and "completed" in tl and " ms" in tl
    shot(d, f"timeline-{binding.replace('+', '')}")

    tab(d, "wire")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#wire > li"), "the wire log")
    first = d.find_element(By.CSS_SELECTOR, "#wire > li details")
    first.find_element(By.TAG_NAME, "summary").click()
    wire = d.find_element(By.ID, "wire").text
    assert "SendStreamingMessage" in wire and binding in wire
    assert "a2a send -a" in wire
    if binding == "GRPC":
        # gRPC: the method path, the metadata, the messages decoded to JSON.
        assert "/lf.a2a.v1.A2AService/SendStreamingMessage" in wire
        assert "Message (decoded to JSON)" in wire and "Stream messages (decoded to JSON)" in wire
        assert "a2a-version: 1.0" in wire
        assert "grpcurl " in wire
    else:
        # The real exchange: the body as sent, each SSE frame as received
        # (its data: lines), a curl repeating the exact request.
        assert "Body, exactly as sent" in wire
        assert "Stream frames, as received" in wire
        assert "HTTP 200" in wire
        assert "data: {" in wire
        assert "text/event-stream" in wire
        assert "curl -sS -N -X POST" in wire and "--data-binary" in wire
    shot(d, f"wire-{binding.replace('+', '')}")

    if binding == "JSONRPC":
        # Versions: refine the Markdown report, then accept the new version.
        tab(d, "versions")
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#versions li"), "the versions")
        md = [li for li in d.find_elements(By.CSS_SELECTOR, "#versions li") if "compatibility-report.md" in li.text][0]
        md.find_element(By.TAG_NAME, "input").send_keys("sort the fixes by risk")
        md.find_element(By.CSS_SELECTOR, "button.refine").click()
        wait(d, lambda: any("refines" in t for t in texts(d, "#versions li")), "the refined version")
        i = [n for n, t in enumerate(texts(d, "#versions li")) if "refines" in t][0]
        d.find_elements(By.CSS_SELECTOR, "#versions li")[i].find_element(By.CSS_SELECTOR, "button.accept").click()
        wait(d, lambda: any("refines" in t and "accepted" in t for t in texts(d, "#versions li")), "accepted")
        shot(d, "versions")


def test_cancel_and_push(browser, procs):
    agent = procs("serve", "--agent", "conformance", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs, "-a", agent.url)
    wait(d, lambda: d.find_elements(By.ID, "card-name"), "connected")
    # Push: the embedded receiver, then a task whose updates it receives.
    tab(d, "webhook")
    d.find_element(By.ID, "webhook-start").click()
    wait(d, lambda: "Receiving at http://127.0.0.1:" in d.find_element(By.ID, "webhook-url").text, "the receiver")
    tab(d, "chat")
    det = d.find_element(By.CSS_SELECTOR, "#chat-form details")
    det.find_element(By.TAG_NAME, "summary").click()
    d.find_element(By.ID, "chat-push").click()
    send(d, "push me", msgid="tck-complete-task", stream=False)
    d.find_element(By.ID, "chat-push").click()
    tab(d, "webhook")
    wait(d, lambda: "verified" in d.find_element(By.ID, "deliveries").text, "a verified delivery")
    shot(d, "webhook")

    # Cancel: a long task, canceled from the Tasks view.
    tab(d, "chat")
    m = d.find_element(By.ID, "chat-msgid")
    m.clear()
    m.send_keys("test-resubscribe-message-id")
    if not d.find_element(By.ID, "chat-stream").is_selected():
        d.find_element(By.ID, "chat-stream").click()
    d.find_element(By.ID, "chat-text").send_keys("a long job")
    d.find_element(By.ID, "send").click()
    wait(d, lambda: "working" in states(d), "the task working")
    tab(d, "tasks")
    d.find_element(By.CSS_SELECTOR, "#tasks-status option[value='working']").click()
    d.find_element(By.ID, "tasks-list").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#tasks tbody tr"), "the working task listed")
    d.find_element(By.CSS_SELECTOR, "#tasks tbody tr button:nth-of-type(2)").click()
    wait(d, lambda: "TASK_STATE_CANCELED" in d.find_element(By.ID, "task-out").text, "canceled")
    shot(d, "tasks-canceled")
    tab(d, "chat")
    wait(d, lambda: "canceled" in states(d), "the chat shows it canceled")


def test_agent_script_is_shown_not_run(browser, procs):
    agent = procs("serve", "--agent", "echo", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs, "-a", agent.url)
    wait(d, lambda: d.find_elements(By.ID, "card-name"), "connected")
    hostile = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> **bold**'
    send(d, hostile)
    wait(d, lambda: "completed" in states(d), "the echo completed")
    log = d.find_element(By.ID, "chat-log")
    agent_text = " ".join(e.text for e in log.find_elements(By.CSS_SELECTOR, ".msg.agent"))
    assert "<script>window.__pwned=1</script>" in agent_text
    assert d.execute_script("return window.__pwned === undefined")
    assert not log.find_elements(By.TAG_NAME, "script")
    assert not log.find_elements(By.CSS_SELECTOR, "img[src='x']")
    shot(d, "hostile-text")


def test_auth_required_is_a_prompt_answered_in_the_same_task(browser, procs):
    agent = procs("serve", "--agent", "conformance", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs, "-a", agent.url)
    wait(d, lambda: d.find_elements(By.ID, "card-name"), "connected")
    send(d, "my account, please", msgid="auth-required")
    wait(d, lambda: d.find_element(By.ID, "prompt").is_displayed(), "the authorization prompt")
    prompt = d.find_element(By.ID, "prompt").text
    assert "needs authorization" in prompt and "authorize" in prompt
    task = d.find_element(By.ID, "chat-task").get_attribute("value")
    assert task, "the reply continues the task"
    assert "auth-required" in states(d)
    shot(d, "chat-auth-required")
    # The reply goes to the same task, which completes.
    m = d.find_element(By.ID, "chat-msgid")
    m.clear()
    send(d, "done, I signed in")
    wait(d, lambda: "completed" in states(d), "the task completed")
    assert d.execute_script("return document.querySelectorAll('#chat-log .msg.agent[data-task]').length") == 1
    assert not d.find_element(By.ID, "prompt").is_displayed()
    shot(d, "chat-auth-answered")


def test_signature_status_in_connect(browser, procs, tmp_path):
    signed = procs("serve", "--agent", "echo", "--port", "0", "--store", "memory", "--sign-card", str(KEYS / "ed25519.pem"))
    unsigned = procs("serve", "--agent", "echo", "--port", "0", "--store", "memory")
    d = browser
    open_inspector(d, procs, "--trust-key", str(KEYS / "ed25519-public.pem"))
    sig = lambda: d.find_element(By.ID, "card-signature")
    connect(d, signed.url)
    wait(
        d,
        lambda: d.find_elements(By.ID, "card-signature")
        and sig().get_attribute("data-status") == "trusted"
        and "verified with a trusted key" in sig().text,
        "verified with the trusted key",
    )
    shot(d, "connect-signature-trusted")
    connect(d, unsigned.url)
    wait(d, lambda: sig().get_attribute("data-status") == "unsigned" and "unsigned" in sig().text, "unsigned")
    shot(d, "connect-signature-unsigned")
