"""The console in a real browser: headless Chromium driven by Playwright (tests/support/browser_support.py)
against the real App serving the console on 127.0.0.1; approvals end to end with the fake
Telegram Bot API and the fake Anthropic API. Screenshots of every page at phone and desktop
width are saved under tests/artifacts/console/."""

from __future__ import annotations

import time

import pytest

from bot.approvals.grants import Scope
from bot.core.identity import OPERATOR as TERMINAL
from bot.jobs.jobs import Job
from bot.jobs.schedule import parse_cron
from bot.ops.console.auth import OPERATOR
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support import store_support
from tests.support.browser_support import DESKTOP, NARROW, PHONE, new_page, open_browser, screenshot

# One worker runs all of them (`make test` distributes with --dist loadgroup): one Chromium
# launch for the module instead of one per worker that happens to get a browser test.
pytestmark = pytest.mark.xdist_group("chromium")

ADA = 4242
HOSTILE = ('<script>alert("script")</script><img src=x onerror="alert(\'img\')">'
           "<b onmouseover=alert(3)>bold?</b>\n" + "a-very-long-unbroken-token-" * 40)
PAGES = {"approvals": "/", "pairing": "/pairing", "senders": "/senders", "grants": "/grants", "jobs": "/jobs",
         "audit": "/audit", "receipts": "/receipts", "usage": "/usage", "health": "/health"}


@pytest.fixture(scope="module")
def browser():
    opened = open_browser()
    yield opened
    opened.close()


@pytest.fixture
async def console(app_factory, tg):
    """(app, base url) with the console and the Telegram channel started by the App."""
    app = await app_factory({"console": {"enabled": True, "port": 0}, **channel_overrides(tg),
                             "senders": {f"telegram:{ADA}": "supervised"}},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    await app.start_services()
    await app.start_channels(["telegram"])
    yield app, f"http://127.0.0.1:{app.console.port}"
    await app.stop_channels()


async def logged_in_page(browser, app, base: str, width: int = PHONE, locale: str = "en-US",
                         zone: str | None = None):
    token = await app.console.context.auth.issue_login()

    def open_and_log_in():
        watched = new_page(browser, width, locale, zone)
        watched.page.goto(f"{base}/login/{token}")
        return watched
    return await browser.run(open_and_log_in)


async def seed(app) -> None:
    """Something on every page: a hostile pending request, pairing codes, audit, receipts, usage."""
    services, store = app.services, app.services.store
    await services.approvals.create(
        session_id="s1", sender=f"telegram:{ADA}", chat=str(ADA), channel="telegram", tool="shell_run",
        tool_use_id="toolu_9", args={"command": "echo hi"}, risk="high", summary=HOSTILE)
    await services.senders.pairing_code("telegram:555")
    await services.senders.pairing_code('discord:<img src=x onerror=alert(1)>')
    await store_support.audit(store, sender=f"telegram:{ADA}", decision="ask", outcome="approved",
                              tool="fs_write", detail="wrote notes.txt <script>alert(1)</script>")
    await store_support.audit(store, sender="telegram:77", decision="deny", outcome="refused",
                              tool="shell_run", detail="rm -rf / refused")
    async with store.transaction() as tx:
        await services.receipts.issue(tx, session_id="s1", tool="fs_write", args={"path": "a"},
                                      result="ok", sender=f"telegram:{ADA}", approver=OPERATOR,
                                      started_at=1.0, finished_at=2.0)
    await services.jobs.create(Job(
        id="", owner=f"telegram:{ADA}", channel="telegram", chat=str(ADA), name="Morning digest",
        schedule=parse_cron("0 8 * * 1-5", timezone="Europe/Rome"), level="supervised",
        prompt="Summarise my unread notes and today's calendar."))
    async with store.transaction() as tx:
        await services.approvals.grants.add(
            tx, session_id="s1", sender=f"telegram:{ADA}", tool="shell_run",
            scope=Scope("prog:git", "git status, git log, git diff"), risk="medium", by=f"telegram:{ADA}")
    now = time.time()
    for day, tokens in enumerate((1200, 5400, 300, 8800, 2500)):
        await store_support.execute(
            store, "INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
                   " cache_read_tokens, cache_write_tokens) VALUES (?, 's1', ?, 'm', ?, 100, 0, 0)",
            (now - day * 86400, f"telegram:{ADA}" if day % 2 else "discord:99", tokens))


async def test_the_one_time_link_logs_in_and_a_replay_shows_how_to_log_in(browser, console):
    app, base = console
    token = await app.console.context.auth.issue_login()

    def visit_twice():
        first = new_page(browser, PHONE)
        first.page.goto(f"{base}/login/{token}")
        heading = first.page.locator("h1").inner_text()
        url = first.page.url
        second = new_page(browser, PHONE)   # another browser profile, the same link
        response = second.page.goto(f"{base}/login/{token}")
        return heading, url, response.status, second.page.locator("main").inner_text()
    heading, url, replay_status, replay_text = await browser.run(visit_twice)
    assert heading == "Approvals" and url == f"{base}/"
    assert replay_status == 401 and "not valid" in replay_text and "myclaw console login" in replay_text


async def test_approving_in_the_browser_edits_the_telegram_request_and_runs_the_tool_once(
        browser, console, tg, fake_anthropic):
    app, base = console
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": "milk"})))
    tg.private_message(ADA, "write milk")
    request = await tg.wait_for_card(lambda p: "inline_keyboard" in (p.get("reply_markup") or {}))
    watched = await logged_in_page(browser, app, base)
    fake_anthropic.script(text("Written."))

    def approve():
        watched.page.reload()
        card = watched.page.locator("article.approval")
        assert "Create notes.txt" in card.locator("pre.preview").first.inner_text()
        card.get_by_role("button", name="Approve").click()
        watched.page.wait_for_selector(".flash.ok")
        return watched.page.locator(".flash").inner_text()
    flash = await browser.run(approve)
    assert flash == f"Approved by {OPERATOR}."
    edit = await tg.wait_for_redraw(request)
    assert f"Approved by {OPERATOR}" in edit.params["text"] and "reply_markup" not in edit.params
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    assert len(await app.services.store.fetchall("SELECT id FROM receipts")) == 1
    assert watched.dialogs == [] and watched.errors == []


async def test_allowing_a_pairing_request_grants_the_chosen_level(browser, console):
    app, base = console
    code = await app.services.senders.pairing_code("telegram:555")
    watched = await logged_in_page(browser, app, base)

    def allow():
        watched.page.goto(f"{base}/pairing")
        card = watched.page.locator(f"#code-{code}")
        card.get_by_label("Level").select_option("full")
        card.get_by_role("button", name="Allow").click()
        watched.page.wait_for_selector(".flash")
        return watched.page.locator(".flash").inner_text(), watched.page.locator("article.pairing").count()
    flash, left = await browser.run(allow)
    assert flash == "Granted full to telegram:555." and left == 0
    assert await app.services.senders.granted_level("telegram:555") == "full"


async def test_revoking_a_grant_removes_it_from_the_page_and_the_session(browser, console):
    app, base = console
    await seed(app)
    watched = await logged_in_page(browser, app, base)

    def revoke():
        watched.page.goto(f"{base}/grants")
        card = watched.page.locator("article.grant").filter(has_text="git status")
        card.get_by_role("button", name="Revoke").click()
        watched.page.wait_for_selector(".flash")
        return watched.page.locator(".flash").inner_text(), watched.page.locator("article.grant").count()
    flash, left = await browser.run(revoke)
    assert flash.startswith("Revoked grant") and "git status" in flash and left == 0
    assert await app.services.approvals.grants.for_session("s1") == ()


async def test_the_audit_filter_shows_only_the_matching_entries(browser, console):
    app, base = console
    await seed(app)
    watched = await logged_in_page(browser, app, base)

    def filter_by_sender():
        watched.page.goto(f"{base}/audit")
        before = watched.page.locator("article.audit-row").count()
        watched.page.get_by_label("Sender").fill("telegram:77")
        watched.page.get_by_role("button", name="Filter").click()
        watched.page.wait_for_url("**/audit?**")
        rows = watched.page.locator("article.audit-row")
        return before, rows.count(), rows.first.inner_text()
    before, after, shown = await browser.run(filter_by_sender)
    assert before >= 2 and after == 1 and "rm -rf / refused" in shown


async def test_verify_shows_the_result_of_checking_every_receipt(browser, console):
    app, base = console
    await seed(app)
    watched = await logged_in_page(browser, app, base)

    def verify():
        watched.page.goto(f"{base}/receipts")
        watched.page.get_by_role("button", name="Verify all signatures").click()
        watched.page.wait_for_selector(".flash")
        return watched.page.locator(".flash").inner_text()
    assert await browser.run(verify) == "All 1 receipts verify."
    await store_support.execute(app.services.store, "UPDATE receipts SET tool = 'shell_run'")
    flash = await browser.run(verify)
    assert flash.startswith("1 problem(s) in 1 receipts.") and "tampered" in flash


async def test_a_hostile_preview_is_shown_as_text_and_runs_nothing(browser, console):
    app, base = console
    await seed(app)
    watched = await logged_in_page(browser, app, base)

    def look():
        watched.page.goto(f"{base}/")
        watched.page.locator("pre.preview").first.hover()
        shown = watched.page.locator("pre.preview").first.inner_text()
        injected = watched.page.evaluate(
            "document.querySelectorAll('main img, main script, main [onmouseover]').length")
        return shown, injected
    shown, injected = await browser.run(look)
    assert shown.startswith('<script>alert("script")</script><img src=x onerror=')
    assert injected == 0
    assert watched.dialogs == [] and watched.errors == []


async def test_every_page_fits_a_phone_and_is_photographed_at_both_widths(browser, console):
    app, base = console
    await seed(app)
    phone = await logged_in_page(browser, app, base, PHONE)
    desktop = await logged_in_page(browser, app, base, DESKTOP)

    def photograph():
        widths = {}
        for name, path in PAGES.items():
            for watched, width in ((phone, PHONE), (desktop, DESKTOP)):
                response = watched.page.goto(f"{base}{path}")
                assert response.status == 200, path
                screenshot(watched, f"{name}-{width}")
            widths[name] = phone.page.evaluate("document.documentElement.scrollWidth")
        return widths
    widths = await browser.run(photograph)
    assert widths == {name: PHONE for name in PAGES}, "a page scrolls sideways on a phone"
    assert phone.dialogs == desktop.dialogs == [] and phone.errors == desktop.errors == []


async def test_every_page_in_italian_fits_a_phone_and_is_photographed(browser, console):
    app, base = console
    await seed(app)
    phone = await logged_in_page(browser, app, base, PHONE, locale="it-IT")

    def photograph():
        seen = {}
        for name, path in PAGES.items():
            assert phone.page.goto(f"{base}{path}").status == 200, path
            screenshot(phone, f"{name}-it-{PHONE}")
            seen[name] = (phone.page.evaluate("document.documentElement.lang"),
                          phone.page.evaluate("document.documentElement.scrollWidth"),
                          phone.page.locator("h1").inner_text())
        return seen
    seen = await browser.run(photograph)
    assert {name: (lang, width) for name, (lang, width, _) in seen.items()} == {
        name: ("it", PHONE) for name in PAGES}, "a page is not Italian or scrolls sideways"
    assert seen["approvals"][2] == "Approvazioni" and seen["jobs"][2] == "Job pianificati"
    assert phone.dialogs == [] and phone.errors == []


async def test_chart_labels_are_readable_and_times_name_the_operators_zone_at_every_width(
        browser, console):
    app, base = console
    await seed(app)
    await app.services.preferences.set_timezone(str(TERMINAL), "Asia/Kolkata")   # /timezone
    app.services.languages.zone_changed(str(TERMINAL), "Asia/Kolkata")
    await store_support.audit(app.services.store, sender="telegram:77", decision="ask",
                              outcome="approved", tool="fs_write", detail="the newest")
    await store_support.execute(app.services.store,   # 2026-12-02 20:00 UTC: 01:30 in Kolkata
                                "UPDATE audit SET ts = 1796241600 WHERE detail = 'the newest'")
    pages = {width: await logged_in_page(browser, app, base, width, zone="Europe/London")
             for width in (NARROW, PHONE, DESKTOP)}

    def look():
        seen = {}
        for width, watched in pages.items():
            watched.page.goto(f"{base}/usage")
            # what a person sees: the font size times the scale the SVG is drawn at
            sizes = watched.page.eval_on_selector_all(".chart text", """nodes => nodes.map(n =>
                parseFloat(getComputedStyle(n).fontSize) * n.ownerSVGElement.getScreenCTM().a)""")
            ticks = watched.page.eval_on_selector_all(
                ".chart text.tick", "nodes => nodes.map(n => n.textContent)")
            days = watched.page.locator("p.zone").inner_text()
            watched.page.goto(f"{base}/audit?sender=telegram:77")
            when = watched.page.locator("article.audit-row time").first.inner_text()
            filters = watched.page.locator("#audit-filters .zone").inner_text()
            seen[width] = (min(sizes), ticks, when, days, filters)
        return seen
    for width, (smallest, ticks, when, days, filters) in (await browser.run(look)).items():
        assert smallest >= 11, f"chart text {smallest:.1f} px high at {width} px"
        assert len(ticks) == len(set(ticks)) >= 3, ticks
        # the operator's zone, not the browser's (London)
        assert when.replace("\u202f", " ") == "Dec 3, 2026, 1:30:00 AM IST", when
        assert "Asia/Kolkata" in days and "Asia/Kolkata" in filters


async def full_audit_page(app) -> None:
    """More than a page of entries as a busy day leaves them: a 64-character arguments hash, a
    session id and a detail line each."""
    for n in range(25):
        await store_support.audit(
            app.services.store, sender=f"telegram:{ADA}", decision="ask", outcome="approved",
            tool="shell_run", session_id=f"telegram:{ADA}:2026-12-0{n % 9 + 1}",
            args_hash=(f"{n:02d}9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")[:64],
            detail=f"git status in the workspace, then git log -n {n} --oneline and a diff of the "
                   "notes folder, approved after a look at the preview")


async def test_a_full_page_of_audit_entries_stays_short_on_a_phone(browser, console):
    app, base = console
    await full_audit_page(app)
    phone = await logged_in_page(browser, app, base, PHONE)

    def measure():
        phone.page.goto(f"{base}/audit")
        screenshot(phone, f"audit-full-{PHONE}")
        cards = phone.page.locator("article.audit-row")
        hash_box = cards.first.locator(".hash")
        return (cards.count(), phone.page.evaluate("document.documentElement.scrollHeight"),
                hash_box.inner_text(), hash_box.get_attribute("title"))
    count, height, shown, whole = await browser.run(measure)
    assert count == 20
    assert height < 4000, f"20 audit entries make a page {height} px tall on a phone"
    assert len(shown.rstrip("…")) == 12 and len(whole) == 64 and whole.startswith(shown.rstrip("…"))
