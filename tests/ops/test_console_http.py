"""The web console over real HTTP: the real App serving the console on 127.0.0.1, a plain
aiohttp client acting as the browser (cookie and CSRF token kept by hand)."""

from __future__ import annotations

import asyncio
import html
import re
import time
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import aiohttp
import pytest

from bot.core.identity import OPERATOR as TERMINAL
from bot.ops.console.auth import OPERATOR
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support import store_support
from tests.support.console_support import CONSOLE, ConsoleClient, logged_in, open_console

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)">\n   indented & "quoted"'
APPROVAL_ID = "A" * 16
ROUTES = [("GET", "/"), ("GET", "/pairing"), ("GET", "/senders"), ("GET", "/jobs"), ("GET", "/grants"),
          ("POST", "/grants/0123456789/revoke"), ("GET", "/audit"),
          ("GET", "/receipts"), ("GET", "/usage"), ("GET", "/health"),
          ("POST", f"/approvals/{APPROVAL_ID}"), ("POST", "/pairing/ABCDEFGH/allow"),
          ("POST", "/pairing/ABCDEFGH/deny"), ("POST", "/receipts/verify"), ("POST", "/logout"),
          ("POST", "/jobs/0123456789/pause"), ("POST", "/jobs/0123456789/resume"),
          ("POST", "/jobs/0123456789/cancel")]


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def app(app_factory):
    return await app_factory({**CONSOLE, "senders": {"telegram:42": "supervised"}})


async def pending_request(app, summary: str = "Create notes.txt", sender: str = "telegram:42"):
    return await app.services.approvals.create(
        session_id="s1", sender=sender, chat="42", channel="telegram", tool="fs_write",
        tool_use_id="toolu_1", args={"path": "notes.txt", "content": "milk"}, risk="medium",
        summary=summary)


async def audit(app, decision: str) -> list[dict]:
    rows = await app.services.store.fetchall("SELECT * FROM audit WHERE decision = ?", (decision,))
    return [dict(row) for row in rows]


async def test_every_page_and_action_answers_401_with_how_to_log_in_without_a_session(app, http):
    client = await open_console(app, http)
    for method, path in ROUTES:
        page = await (client.get(path) if method == "GET" else client.post(path, {"csrf": "0" * 64}))
        assert page.status == 401, (method, path)
        assert "myclaw console login" in page.text
    client.cookie = "x" * 43  # a cookie of the right shape that names no session
    assert (await client.get("/")).status == 401


async def test_a_login_link_sets_a_strict_http_only_cookie_and_works_once(app, http):
    client = await open_console(app, http)
    token = await app.console.context.auth.issue_login()
    async with http.get(f"{client.base}/login/{token}", allow_redirects=False) as response:
        assert response.status == 303 and response.headers["Location"] == "/"
        cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    client.cookie = cookie.split(";")[0].split("=", 1)[1]
    assert (await client.get("/")).status == 200
    replay = ConsoleClient(client.base, http)
    page = await replay.login(token)
    assert page.status == 401 and "not valid" in page.text and replay.cookie is None
    outcomes = [row["outcome"] for row in await audit(app, "console:login")]
    assert outcomes == ["ok", "refused"]


async def test_the_stored_login_token_and_session_are_only_hashes(app, http):
    client = await logged_in(app, http)
    rows = await app.services.store.fetchall("SELECT token_hash FROM console_sessions")
    assert [len(r["token_hash"]) for r in rows] == [64]
    assert client.cookie not in rows[0]["token_hash"]


async def test_the_cookie_is_secure_behind_a_tls_proxy(app, http):
    client = await open_console(app, http)
    token = await app.console.context.auth.issue_login()
    async with http.get(f"{client.base}/login/{token}", allow_redirects=False,
                        headers={"X-Forwarded-Proto": "https"}) as response:
        assert "Secure" in response.headers["Set-Cookie"]


async def test_a_login_link_used_after_its_lifetime_fails(app, http):
    client = await open_console(app, http)
    auth = app.console.context.auth
    token = await auth.issue_login()
    auth.clock = lambda: time.time() + auth.login_ttl + 1
    assert (await client.login(token)).status == 401


async def test_a_flood_of_forged_links_adds_a_bounded_number_of_audit_rows_and_a_real_link_works(
        app, http):
    from bot.ops.console.auth import REFUSED_AUDITS_PER_MINUTE

    client = await open_console(app, http)
    auth = app.console.context.auth
    now = [1_000_000.0]
    auth.clock = lambda: now[0]
    forged = ["A" * 43, "not-a-token", "B" * 43] * 20
    for token in forged:
        assert (await client.login(token)).status == 401
    token = await auth.issue_login()
    assert (await client.login(token)).status == 303
    rows = await audit(app, "console:login")
    assert [r["outcome"] for r in rows] == ["refused"] * REFUSED_AUDITS_PER_MINUTE + ["ok"]
    now[0] += 61  # the next minute: the first refusal audited counts the ones left out
    assert (await client.login("C" * 43)).status == 401
    last = (await audit(app, "console:login"))[-1]
    left_out = len(forged) - REFUSED_AUDITS_PER_MINUTE
    assert last["outcome"] == "refused" and f"(+{left_out} more refused, not audited)" in last["detail"]


async def test_an_expired_session_is_refused(app, http):
    client = await logged_in(app, http)
    auth = app.console.context.auth
    assert (await client.get("/")).status == 200
    auth.clock = lambda: time.time() + auth.session_ttl + 1
    assert (await client.get("/")).status == 401


async def test_logout_all_from_the_command_line_ends_every_session(app, http, tmp_path):
    from bot.ops.cli import main

    first, second = await logged_in(app, http), await logged_in(app, http)
    config_file = tmp_path / "myclaw.toml"
    config_file.write_text(f'[store]\npath = "{app.config.store_path}"\n')
    assert await asyncio.to_thread(main, ["--config", str(config_file), "console", "logout", "--all"]) == 0
    assert (await first.get("/")).status == 401 and (await second.get("/")).status == 401


async def test_the_login_command_prints_a_link_that_logs_in_once(app, http, tmp_path, capsys):
    from bot.ops.cli import main

    client = await open_console(app, http)
    config_file = tmp_path / "myclaw.toml"
    port = app.console.port
    config_file.write_text(f'[store]\npath = "{app.config.store_path}"\n'
                           f'[console]\nenabled = true\nport = {port}\n')
    assert await asyncio.to_thread(main, ["--config", str(config_file), "console", "login"]) == 0
    link = capsys.readouterr().out.strip()
    assert link.startswith(f"http://127.0.0.1:{port}/login/")
    assert (await client.login(link.rsplit("/", 1)[1])).status == 303
    assert (await client.get("/")).status == 200


async def test_the_logout_button_ends_this_session(app, http):
    client = await logged_in(app, http)
    await client.post("/logout", {"csrf": await client.csrf()})
    assert (await client.get("/")).status == 401


async def test_a_post_without_the_csrf_token_changes_nothing(app, http):
    client = await logged_in(app, http)
    code = await app.services.senders.pairing_code("telegram:555")
    refused = await client.post(f"/pairing/{code}/allow", {"level": "full"})
    assert refused.status == 403
    wrong = await client.post(f"/pairing/{code}/allow", {"level": "full", "csrf": "f" * 64})
    assert wrong.status == 403
    assert await app.services.senders.granted_level("telegram:555") is None
    assert len(await audit(app, "console:csrf")) == 2


async def test_a_cross_site_post_is_refused_even_with_the_token(app, http):
    client = await logged_in(app, http)
    code = await app.services.senders.pairing_code("telegram:555")
    token = await client.csrf("/pairing")
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        sent = await client.post(f"/pairing/{code}/allow", {"level": "full", "csrf": token}, headers)
        assert sent.status == 403
    assert await app.services.senders.granted_level("telegram:555") is None


async def test_a_hostile_preview_and_sender_are_shown_escaped_and_whole(app, http):
    client = await logged_in(app, http)
    await pending_request(app, summary=HOSTILE + "\n" + "x" * 5000 + "END", sender="telegram:42")
    page = await client.get("/")
    assert "<script>alert" not in page.text and "onerror=\"alert" not in page.text
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"
    assert escaped in page.text
    assert "\n   indented &amp; &#34;quoted&#34;" in page.text   # whitespace kept for <pre>
    assert "x" * 5000 + "END" in page.text                      # never cut


async def test_every_response_carries_the_strict_security_headers(app, http):
    client = await logged_in(app, http)
    for page in (await client.get("/"), await client.get("/static/console.css"),
                 await ConsoleClient(client.base, http).get("/audit"),
                 await client.post("/receipts/verify", {})):
        csp = page.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp and "form-action 'self'" in csp
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        assert page.headers["Referrer-Policy"] == "no-referrer"


async def test_no_page_has_inline_script_or_event_handlers(app, http):
    client = await logged_in(app, http)
    await pending_request(app)
    await app.services.senders.pairing_code("telegram:555")
    for path in ("/", "/pairing", "/senders", "/grants", "/jobs", "/audit", "/receipts", "/usage",
                 "/health"):
        page = await client.get(path)
        assert page.status == 200, path
        assert "<script>" not in page.text and " on" + "click" not in page.text
        assert page.text.count("<script") == 1 and 'src="/static/console.js"' in page.text


async def test_approve_in_the_console_is_recorded_with_the_operator_as_resolver(app, http):
    client = await logged_in(app, http)
    request = await pending_request(app)
    page = await client.act(f"/approvals/{request.id}", {"choice": "deny"})
    assert f"Denied by {OPERATOR}." in page.text
    stored = await app.services.approvals.get(request.id)
    assert stored.resolved_by == OPERATOR and stored.status in ("denied", "failed")
    again = await client.act(f"/approvals/{request.id}", {"choice": "approve"})
    assert f"already denied by {OPERATOR}" in again.text
    rows = await audit(app, "console:approval")
    assert [r["outcome"] for r in rows] == ["ok", "refused"]
    assert rows[0]["detail"] == f"{request.id}: Denied by {OPERATOR}."   # as read, not a dict


async def test_the_console_is_an_approver_only_when_it_is_enabled(app_factory):
    on = await app_factory(CONSOLE)
    assert OPERATOR in on.services.approvals.approvers
    request = await pending_request(on, sender="telegram:7")
    assert (await on.services.approvals.resolve(request.id, OPERATOR, "deny")).ok


async def test_without_the_console_its_name_cannot_answer_anything(app_factory):
    off = await app_factory()
    assert OPERATOR not in off.services.approvals.approvers
    request = await pending_request(off, sender="telegram:7")
    resolution = await off.services.approvals.resolve(request.id, OPERATOR, "approve")
    assert not resolution.ok and "Only telegram:7" in resolution.reason


async def test_pairing_allow_grants_the_chosen_level_and_deny_refuses(app, http):
    client = await logged_in(app, http)
    code = await app.services.senders.pairing_code("telegram:555")
    other = await app.services.senders.pairing_code("telegram:666")
    page = await client.act(f"/pairing/{code}/allow", {"level": "read_only"}, page="/pairing")
    assert "Granted read_only to telegram:555." in page.text
    assert await app.services.senders.granted_level("telegram:555") == "read_only"
    page = await client.act(f"/pairing/{other}/deny", {}, page="/pairing")
    assert "Denied pairing for telegram:666." in page.text
    again = await client.act(f"/pairing/{code}/allow", {"level": "full"}, page="/pairing")
    assert "already used" in again.text
    pair_rows = await audit(app, "pair")
    assert {r["sender"] for r in pair_rows} == {OPERATOR}


async def test_a_bad_level_is_refused_with_the_reason(app, http):
    client = await logged_in(app, http)
    code = await app.services.senders.pairing_code("telegram:555")
    page = await client.act(f"/pairing/{code}/allow", {"level": "root"}, page="/pairing")
    assert "unknown level" in page.text
    assert await app.services.senders.granted_level("telegram:555") is None


async def test_the_audit_filters_by_sender_tool_decision_and_date(app, http):
    client = await logged_in(app, http)
    store = app.services.store
    await store_support.audit(store, sender="telegram:1", decision="ask", outcome="approved",
                              tool="fs_write", detail="first <b>one</b>")
    await store_support.audit(store, sender="telegram:2", decision="deny", outcome="refused",
                              tool="shell_run", detail="second")
    page = await client.get("/audit", sender="telegram:1")
    assert "first &lt;b&gt;one&lt;/b&gt;" in page.text and "second" not in page.text
    page = await client.get("/audit", tool="shell_run")
    assert "second" in page.text and "first" not in page.text
    page = await client.get("/audit", decision="refused")
    assert "second" in page.text and "first" not in page.text
    page = await client.get("/audit", **{"from": "2001-01-01", "to": "2001-01-02"})
    assert "No audit entries match." in page.text
    page = await client.get("/audit", **{"from": "yesterday"})
    assert "is not a date" in page.text and "second" in page.text


async def test_the_audit_log_is_paged_and_the_consoles_own_logins_are_folded_away(app, http):
    client = await logged_in(app, http)
    store = app.services.store
    for n in range(60):
        await store_support.audit(store, sender="telegram:1", decision="ask", outcome="approved",
                                  tool="fs_write", detail=f"entry {n:02d}")
    for _ in range(5):
        await store_support.audit(store, sender="console:operator", decision="console:login",
                                  outcome="ok")

    def shown(page) -> list[str]:
        return re.findall(r"entry (\d\d)", page.text)

    def link(page, kind: str) -> dict[str, str]:
        found = re.search(rf'class="{kind}" href="/audit\?([^"]*)"', page.text)
        return dict(parse_qsl(html.unescape(found.group(1)))) if found else {}
    first = await client.get("/audit", sender="telegram:1")
    assert shown(first) == [f"{n:02d}" for n in range(59, 39, -1)]       # the newest 20
    everyone = await client.get("/audit")
    assert '<span class="decision">console:login' not in everyone.text
    assert re.search(r"[67] console login entries hidden: show", everyone.text)
    second = await client.get("/audit", **link(first, "older"))
    assert link(first, "older")["sender"] == "telegram:1"                  # the filter carries on
    assert shown(second) == [f"{n:02d}" for n in range(39, 19, -1)]
    third = await client.get("/audit", **link(second, "older"))
    assert shown(third) == [f"{n:02d}" for n in range(19, -1, -1)] and not link(third, "older")
    unfolded = await client.get("/audit", **link(everyone, "folded"))
    assert unfolded.text.count('<span class="decision">console:login') >= 5


async def test_the_audit_days_and_times_are_the_operators_time_zone_named(app, http):
    client = await logged_in(app, http)
    await app.services.preferences.set_timezone(str(TERMINAL), "Asia/Kolkata")   # /timezone
    app.services.languages.zone_changed(str(TERMINAL), "Asia/Kolkata")
    await store_support.audit(app.services.store, sender="telegram:9", decision="ask",
                              outcome="approved", detail="late evening in UTC")
    await store_support.execute(app.services.store,   # 2026-12-02 20:00 UTC: Dec 3 in Kolkata
                                "UPDATE audit SET ts = 1796241600 WHERE sender = 'telegram:9'")
    that_day = await client.get("/audit", sender="telegram:9", **{"from": "2026-12-03",
                                                                  "to": "2026-12-03"})
    assert "late evening in UTC" in that_day.text
    assert "1:30:00\u202fAM IST" in that_day.text and 'title="2026-12-02 20:00:00 UTC"' in that_day.text
    assert "Days and times are in Asia/Kolkata" in that_day.text
    day_before = await client.get("/audit", sender="telegram:9", **{"to": "2026-12-02"})
    assert "late evening in UTC" not in day_before.text


async def test_only_the_consoles_routine_sign_ins_are_folded_and_what_the_operator_did_shows(
        app, http):
    client = await logged_in(app, http)   # a link issued and a login: folded
    store = app.services.store
    shown_rows = [("console:grant-revoke", "ok"), ("console:job-cancel", "refused"),
                  ("console:pair-allow", "ok"), ("console:approval", "ok"),
                  ("console:csrf", "refused"), ("console:login", "refused")]
    for decision, outcome in [*shown_rows, ("console:logout", "ok")]:
        await store_support.audit(store, sender="console:operator", decision=decision,
                                  outcome=outcome, detail=f"{decision} {outcome}")
    page = await client.get("/audit")
    decisions = re.findall(r'<span class="decision">([^<]*)</span> → <span class="outcome">([^<]*)<',
                           page.text)
    assert sorted(decisions) == sorted(shown_rows)
    assert "3 console login entries hidden: show" in page.text


async def test_verify_reports_a_clean_log_and_then_a_tampered_receipt(app, http):
    client = await logged_in(app, http)
    receipts = app.services.receipts
    for n in range(2):
        async with app.services.store.transaction() as tx:
            await receipts.issue(tx, session_id="s1", tool="fs_write", args={"n": n}, result="ok",
                                 sender="telegram:42", approver=None, started_at=1.0, finished_at=2.0)
    page = await client.act("/receipts/verify", {}, page="/receipts")
    assert "All 2 receipts verify." in page.text
    await store_support.execute(app.services.store,
                                "UPDATE receipts SET sender = 'telegram:666' WHERE id = 2")
    page = await client.act("/receipts/verify", {}, page="/receipts")
    assert "1 problem(s) in 2 receipts." in page.text and "receipt 2" in page.text


async def test_usage_is_drawn_as_an_svg_chart_per_day_and_per_sender(app, http):
    client = await logged_in(app, http)
    await store_support.execute(
        app.services.store, "INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
        " cache_read_tokens, cache_write_tokens)"
        " VALUES (?, 's1', '<b>telegram:42</b>', 'm', 1200, 300, 0, 0)",
        (time.time(),))
    page = await client.get("/usage")
    assert page.text.count("<svg") == 2 and "1.5k" in page.text
    assert "&lt;b&gt;telegram:42&lt;/b&gt;" in page.text


async def test_health_shows_the_store_and_each_channel(app, http):
    client = await logged_in(app, http)
    app.channels["telegram"] = type("Down", (), {"connected": False})()
    page = await client.get("/health")
    assert "Store: <b>answering</b>" in page.text and "telegram: <b>NOT connected</b>" in page.text


async def test_health_on_postgresql_names_the_database_but_never_its_password(
        app_factory, http, pg_schema):
    await pg_schema.empty()
    parts = urlsplit(pg_schema.store_url)
    # Trust authentication ignores the password; the page must not show it.
    url = urlunsplit(parts._replace(netloc=f"{parts.username}:pw-never-shown@{parts.hostname}"
                                           f":{parts.port or 5432}"))
    app = await app_factory(CONSOLE, env={"MYCLAW_DATABASE_URL": url})
    client = await logged_in(app, http)
    page = await client.get("/health")
    assert "Store: <b>answering</b>" in page.text
    assert f"{parts.username}:***@{parts.hostname}" in page.text
    assert "pw-never-shown" not in page.text


async def test_logout_all_also_voids_login_links_not_used_yet(app, http):
    client = await open_console(app, http)
    auth = app.console.context.auth
    token = await auth.issue_login()
    assert await auth.revoke_all() == 0
    assert (await client.login(token)).status == 401


async def test_forged_login_tokens_of_any_shape_are_refused_and_audited(app, http):
    client = await open_console(app, http)
    for forged in ("x", "A" * 43, "%00" * 20, "A" * 5000):
        assert (await client.login(forged)).status in (401, 404)
    assert client.cookie is None
    assert {r["outcome"] for r in await audit(app, "console:login")} == {"refused"}


async def test_an_approval_answered_while_its_channel_is_down_still_runs_once_and_is_saved(
        app, http, fake_anthropic):
    from bot.core.events import CollectingSink, IncomingMessage

    client = await logged_in(app, http)
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": "milk"})))
    await app.agent.handle(IncomingMessage("telegram:42", "42", "write milk", channel="telegram"),
                           CollectingSink())
    (pending,) = await app.services.approvals.pending()
    fake_anthropic.script(text("Written."))
    page = await client.act(f"/approvals/{pending.id}", {"choice": "approve"})
    assert f"Approved by {OPERATOR}." in page.text
    await fake_anthropic.wait_for_requests(2)
    await app.agent.queue.drain(timeout=5)
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    stored = await app.services.approvals.get(pending.id)
    assert stored.status == "executed" and stored.resolved_by == OPERATOR


async def test_jobs_can_be_paused_resumed_and_cancelled_from_the_console(app, http):
    from bot.jobs.jobs import Job
    from bot.jobs.schedule import parse_cron

    client = await logged_in(app, http)
    job = await app.services.jobs.create(Job(
        id="", owner="telegram:42", channel="telegram", chat="42", name="<i>digest</i>",
        schedule=parse_cron("0 8 * * *", timezone="UTC"), level="supervised",
        prompt="summarise <script>x</script>"))
    page = await client.get("/jobs")
    assert "&lt;i&gt;digest&lt;/i&gt;" in page.text and "summarise &lt;script&gt;" in page.text
    page = await client.act(f"/jobs/{job.id}/pause", {}, page="/jobs")
    assert f"Paused job {job.id}" in page.text
    assert (await app.services.jobs.get(job.id)).status == "paused"
    page = await client.act(f"/jobs/{job.id}/pause", {}, page="/jobs")
    assert "is paused" in page.text
    page = await client.act(f"/jobs/{job.id}/resume", {}, page="/jobs")
    assert (await app.services.jobs.get(job.id)).status == "active"
    page = await client.act(f"/jobs/{job.id}/cancel", {}, page="/jobs")
    assert f"Cancelled job {job.id}" in page.text and "No active or paused jobs." in page.text
    assert (await app.services.jobs.get(job.id)).status == "cancelled"
    assert [r["outcome"] for r in await audit(app, "console:job-pause")] == ["ok", "refused"]


async def add_grant(app, label: str = "files under notes/", sender: str = "telegram:42"):
    from bot.approvals.grants import Scope

    async with app.services.store.transaction() as tx:
        return await app.services.approvals.grants.add(
            tx, session_id="s1", sender=sender, tool="fs_write", scope=Scope("dir:notes", label),
            risk="medium", by=sender)


async def test_a_grant_revoked_in_the_console_no_longer_covers_the_session(app, http):
    client = await logged_in(app, http)
    grant = await add_grant(app, label="<b>notes</b>/")
    grants = app.services.approvals.grants
    assert len(await grants.for_session("s1")) == 1     # cached, as the dispatcher sees it
    page = await client.get("/grants")
    assert "&lt;b&gt;notes&lt;/b&gt;/" in page.text
    page = await client.act(f"/grants/{grant.id}/revoke", {}, page="/grants")
    assert f"Revoked grant {grant.id} of telegram:42" in page.text and "No live grants." in page.text
    assert await grants.for_session("s1") == ()
    again = await client.act(f"/grants/{grant.id}/revoke", {}, page="/grants")
    assert "already revoked" in again.text
    revoked = [r for r in await audit(app, "grant") if r["outcome"] == "revoked"]
    assert [r["sender"] for r in revoked] == [OPERATOR]


async def test_spend_is_charted_per_day_and_per_sender_once_usage_rows_carry_a_cost(app, http):
    client = await logged_in(app, http)
    store = app.services.store
    columns = {row["name"] for row in await store.fetchall("PRAGMA table_info(usage)")}
    if "cost" not in columns:  # the price table's migration adds it; until it lands, as it would
        await store_support.execute(store, "ALTER TABLE usage ADD COLUMN cost REAL")
    now = time.time()
    for ts, sender, cost in ((now, "telegram:42", 1.25), (now - 86400, "telegram:42", 0.5),
                             (now, "discord:7", 0.25), (now, "cli:local", None)):
        await store_support.execute(
            store, "INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
                   " cache_read_tokens, cache_write_tokens, cost) VALUES (?, 's1', ?, 'm', 1000, 0, 0, 0, ?)",
            (ts, sender, cost))
    page = await client.get("/usage")
    assert "Spend over the last 30 days: <b>2.00" in page.text
    assert "Spend per day" in page.text and page.text.count("<svg") == 4
    assert "telegram:42 · 1.75" in page.text and "discord:7 · 0.25" in page.text
    assert "Model tokens (input + output) over the last 30 days: <b>4.0k</b>" in page.text


async def test_without_any_priced_row_only_tokens_are_charted(app, http):
    client = await logged_in(app, http)
    await store_support.execute(
        app.services.store, "INSERT INTO usage(ts, session_id, sender, model, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens)"
        " VALUES (?, 's1', 'cli:local', 'm', 5, 5, 0, 0)",
        (time.time(),))
    page = await client.get("/usage")
    assert "Spend" not in page.text and page.text.count("<svg") == 2
