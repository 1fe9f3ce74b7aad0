"""The paste page (`GET /`) and the API page (`GET /docs`), in a real headless Chromium.

The browser is Debian's `chromium` driven by Playwright's Python package against the system
binary (Playwright never downloads a browser here); `.ci/run` installs the package. Where
either is missing the browser tests are skipped and say why. Every request the browser makes
is recorded: anything not to the test server would fail the test (the pages work offline).
"""

from __future__ import annotations

import gzip
import os
import re
from importlib import resources

import pytest

for _mod in ("fastapi", "uvicorn", "python_multipart"):
    pytest.importorskip(_mod, reason=f"the server tests need the [server] extra ({_mod} is not installed)")

from serve_support import LOG, TOKEN, call, expected_ids, running  # noqa: E402

CHROMIUM = os.environ.get("VLLM_TRIAGE_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS_LOG = (
    "\n".join(
        [
            "INFO 07-01 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
            "INFO 07-01 10:00:00 [api_server.py:1043] vLLM API server version 0.8.5",
            "Traceback (most recent call last):",
            '  File "/app/serve.py", line 3, in <module>',
            'ValueError: model <img src=x onerror="window.__pwned=2"> <script>window.__pwned=1</script> is not valid',
        ]
    )
    + "\n"
)
STATIC = resources.files("triage.apps.serve") / "static"


# ---- without a browser: what the files and headers promise ----------------------------------------


def test_pages_are_self_contained_and_strict():
    for name in ("index.html", "docs.html", "page.js", "report_view.js", "docs.js", "page.css"):
        text = (STATIC / name).read_text()
        assert not re.search(r"(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text), f"{name} names another host"
        assert not re.search(r"(?i)\son[a-z]+\s*=", text), f"{name} has an inline event handler"
        assert not re.search(
            r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|localStorage|"
            r"sessionStorage|document\.cookie",
            text,
        ), f"{name} inserts HTML or stores data"
    for name in ("index.html", "docs.html"):
        html = (STATIC / name).read_text()
        assert re.findall(r"<script[^>]*>", html) and all("src=" in t for t in re.findall(r"<script[^>]*>", html))
        assert "<style" not in html and "style=" not in html
    with running() as p:
        for path, media in (
            ("/", "text/html"),
            ("/docs", "text/html"),
            ("/static/page.js", "text/javascript"),
            ("/static/report_view.js", "text/javascript"),
            ("/static/docs.js", "text/javascript"),
            ("/static/page.css", "text/css"),
        ):
            r = call(p, "GET", path)
            assert r.status == 200 and r.headers["content-type"].startswith(media), path
            assert r.headers["content-security-policy"].startswith("default-src 'self'")
            assert r.headers["x-content-type-options"] == "nosniff"


# ---- in Chromium ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's `chromium` package (.ci/run does)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright's Python package is missing: pip install -e '.[test]'"
    )
    with sync_api.sync_playwright() as pw:
        try:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # noqa: BLE001 - a browser that cannot start is a skip, said so
            pytest.skip(f"Chromium at {CHROMIUM} does not start: {str(exc).splitlines()[0][:200]}")
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def server():
    with running(token=TOKEN) as p:
        yield f"http://127.0.0.1:{p}"


@pytest.fixture()
def page(browser, server):
    context = browser.new_context()
    context.set_default_timeout(120_000)  # a bound for a loaded machine, not a speed requirement
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    elsewhere: list[str] = []
    problems: list[str] = []

    def only_here(route) -> None:
        if route.request.url.startswith(server + "/"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_here)
    pg = context.new_page()

    def console(message) -> None:  # CSP refusals and script errors; an HTTP error status is the test's business
        if message.type == "error" and not message.text.startswith("Failed to load resource: the server responded"):
            problems.append(message.text)

    pg.on("console", console)
    pg.on("pageerror", lambda e: problems.append(str(e)))
    pg.on("dialog", lambda d: (problems.append("dialog: " + d.message), d.dismiss()))
    pg.goto(server + "/")
    yield pg
    assert elsewhere == [], f"the page asked for other hosts: {elsewhere}"
    assert problems == [], f"errors in the page: {problems}"
    context.close()


def _diagnose(pg, text: str) -> str:
    """Paste, press the button, and wait for this analysis to finish: the click's handler says
    "analysing…" at once and "done" (or an error) when the report is shown; waiting for a report
    heading alone would find the previous report's and race the new request."""
    from playwright.sync_api import expect

    pg.fill("#log", text)
    pg.click("#go")
    expect(pg.locator("#status")).not_to_have_text("analysing…", timeout=120_000)
    pg.wait_for_selector("#report h2", timeout=120_000)
    return pg.inner_text("#report")


def test_paste_a_log_get_the_cause_on_screen(page):
    page.fill("#token", TOKEN)
    shown = _diagnose(page, LOG.decode())
    assert expected_ids(LOG)[0] in shown and "vllm-triage: failed" in shown
    assert page.input_value("#token") == ""  # taken into the tab's memory, not left in the field
    page.fill("#log", "")
    shown = _diagnose(page, LOG.decode())  # the second request still carries the token
    assert expected_ids(LOG)[0] in shown
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert page.evaluate("document.cookie") == ""
    assert page.locator("#report li button.copy").count() >= 1  # remedy commands are copyable
    page.click("#copy-md")  # the Markdown comes from a second request: wait for the page to say it copied
    from playwright.sync_api import expect

    expect(page.locator("#status")).to_have_text("Markdown copied", timeout=120_000)
    assert page.evaluate("navigator.clipboard.readText()").startswith("## vllm-triage: failed")
    page.click("#copy-slack")
    expect(page.locator("#status")).to_have_text("Slack text copied", timeout=120_000)
    slack = page.evaluate("navigator.clipboard.readText()")
    assert slack.startswith("*vllm-triage: failed*") and "<details>" not in slack and "## " not in slack


def test_a_wrong_token_is_said_and_forgotten(page):
    page.fill("#token", "wrong")
    page.fill("#log", LOG.decode())
    page.click("#go")
    page.wait_for_selector("#status.error")
    assert "401" in page.inner_text("#status") and page.locator("#report h2").count() == 0


def test_log_text_is_shown_as_text_never_run(page):
    page.fill("#token", TOKEN)
    shown = _diagnose(page, XSS_LOG)
    assert '<img src=x onerror="window.__pwned=2">' in shown and "<script>window.__pwned=1</script>" in shown
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#report img, #report script").count() == 0


def test_drop_a_gzip_file(page):
    page.fill("#token", TOKEN)
    page.set_input_files(
        "#file", files=[{"name": "startup.log.gz", "mimeType": "application/gzip", "buffer": gzip.compress(LOG)}]
    )
    page.wait_for_selector("#report h2", timeout=120_000)
    shown = page.inner_text("#report")
    assert expected_ids(LOG)[0] in shown and "startup.log.gz" in shown


def test_the_api_page_reads_the_document_offline(page, server):
    page.goto(server + "/docs")
    page.wait_for_selector("#api h2")
    headings = page.locator("#api h2").all_inner_texts()
    assert {"POST /v1/triage", "POST /v1/slack/command", "GET /v1/rules", "GET /healthz"} <= set(headings)
    assert "text/markdown" in page.inner_text("#api")


def test_the_report_is_rendered_from_json_with_nothing_to_unescape(page, tmp_path):
    """The page shows the JSON report's fields: no Markdown escapes (max\\_model\\_len), no stray
    code spans, a facts row of two cells even when a value holds `|`, copy buttons beside the
    text they copy (never over it); screenshots under the test's tmp dir."""
    page.fill("#token", TOKEN)
    shown = _diagnose(page, LOG.decode())
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert "\\_" not in shown and "max_model_len" in shown
    for row in page.locator("#report table.facts tr").all():
        assert row.locator("td, th").count() == 2
    for button in page.locator("#report button.copy").all():
        box = button.bounding_box()
        sibling = button.evaluate_handle("b => b.previousElementSibling || b.parentElement.nextElementSibling")
        other = sibling.as_element().bounding_box() if sibling.as_element() else None
        if box and other:
            apart = (
                box["x"] >= other["x"] + other["width"]
                or box["x"] + box["width"] <= other["x"]
                or box["y"] >= other["y"] + other["height"]
                or box["y"] + box["height"] <= other["y"]
            )
            assert apart, "a copy button covers the text it copies"
    page.click("#copy-slack")
    from playwright.sync_api import expect

    expect(page.locator("#status")).to_have_text("Slack text copied", timeout=120_000)
    slack = page.evaluate("navigator.clipboard.readText()")
    assert "\\" not in slack and expected_ids(LOG)[0] in slack
    page.locator("#report details").first.evaluate("d => d.open = true")
    page.screenshot(path=str(tmp_path / "evidence.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 0
