"""The console's web server: aiohttp, Jinja2 templates rendered on the server, one static folder.

Every response carries a strict Content-Security-Policy (scripts and styles only from our own
static files, no inline code, no framing), `nosniff` and `no-referrer`. Every route but the
login link and the static files needs a live session cookie (else 401 and how to log in);
every POST also needs the session's CSRF token and must not come from another site. Actions
are audited with their outcome, then redirect back to their page (shown there once). Every page
is in the operator's language: the one they chose with /language in the terminal, else the
browser's Accept-Language, else `[agent] language`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from aiohttp import web
from markupsafe import Markup

from bot.core.errors import MyclawError
from bot.core.identity import OPERATOR as TERMINAL_SENDER
from bot.language.catalogs import N_
from bot.language.names import from_accept_language
from bot.language.translator import Translator
from bot.ops.console.auth import OPERATOR, ConsoleSession, csrf_matches
from bot.ops.console.pages import PAGES
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page, utc_text
from bot.store.audit import AuditEntry, write_audit

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
COOKIE = "myclaw_console"
MAX_FLASHES = 256
MAX_FORM_BYTES = 64 * 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


# Words the templates look up by value (a request's or a job's status, a risk).
STATUS_WORDS = (N_("pending"), N_("approved"), N_("denied"), N_("expired"), N_("started"),
                N_("executed"), N_("failed"), N_("in_doubt"), N_("active"), N_("paused"),
                N_("done"), N_("cancelled"))
STALE_FORM = N_("This form is stale or came from another site; reload the page and try again.")


class ConsoleError(MyclawError):
    """The console could not listen (address in use, bad address)."""


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["when"] = when
    return env


@jinja2.pass_context
def when(context: Any, ts: float | None) -> Markup | str:
    """A moment as the operator reads it: date and time in their zone, the zone named (their
    language's format: "Dec 12, 2026, 12:47:17 AM CET"); the UTC time on hover."""
    if ts is None:
        return "-"
    tr: Translator = context["tr"]
    return Markup('<time datetime="{0}" title="{1}">{2}</time>').format(
        datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), utc_text(ts),
        tr.moment(ts, seconds=True))


class ConsoleServer:
    def __init__(self, context: ConsoleContext, pages: tuple[Page, ...] = PAGES):
        section = context.config["console"]
        self.context = context
        self.pages = pages
        self.listen: str = section["listen"]
        self._configured_port: int = section["port"]
        self._secure: Any = section["secure_cookies"]
        self._env = templates()
        # One notice per session, shown on the next page it loads (post/redirect/get).
        self._flashes: OrderedDict[int, Outcome] = OrderedDict()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FORM_BYTES)
        app.on_response_prepare.append(_add_security_headers)
        app.router.add_get("/login/{token}", self._login)
        app.router.add_post("/logout", self._authed(self._logout))
        app.router.add_static("/static", HERE / "static", show_index=False, follow_symlinks=False)
        for page in self.pages:
            app.router.add_get(page.path, self._authed(self._page_handler(page)))
            for action in page.actions:
                app.router.add_post(action.route, self._authed(self._action_handler(page, action)))
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.application(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.listen, self._configured_port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConsoleError(f"[console] cannot listen on {self.listen}:{self._configured_port}: "
                               f"{exc.strerror}") from exc
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("console on http://%s:%s/ (log in with `myclaw console login`)", self.listen,
                 self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # --- access ---------------------------------------------------------------------------

    def _authed(self, handler: Any) -> Any:
        """`handler(request, session)` behind the session check, and for a POST the CSRF check."""
        async def guarded(request: web.Request) -> web.StreamResponse:
            session = await self.context.auth.session(request.cookies.get(COOKIE))
            if session is None:
                return await self._render(request, "login.html", {"reason": None}, status=401)
            if request.method == "POST":
                form = await request.post()
                if _cross_site(request) or not csrf_matches(session, form.get("csrf")):
                    await self._audit(AuditEntry(
                        sender=OPERATOR, decision="console:csrf", outcome="refused",
                        detail=f"{request.method} {request.path[:80]}"))
                    raise web.HTTPForbidden(text=self._reader(request)._(STALE_FORM))
            return await handler(request, session)
        return guarded

    async def _login(self, request: web.Request) -> web.StreamResponse:
        client = request.headers.get("User-Agent", "")
        session_token = await self.context.auth.redeem(request.match_info["token"], client)
        if session_token is None:
            return await self._render(request, "login.html", {"reason": "used"}, status=401)
        response = _see_other("/")
        response.set_cookie(COOKIE, session_token, httponly=True, samesite="Strict", path="/",
                            secure=self._secure_cookie(request),
                            max_age=int(self.context.auth.session_ttl))
        return response

    async def _logout(self, request: web.Request, session: ConsoleSession) -> web.StreamResponse:
        await self.context.auth.revoke(session.id)
        response = _see_other("/")
        response.del_cookie(COOKIE, path="/")
        return response

    def _secure_cookie(self, request: web.Request) -> bool:
        if self._secure != "auto":
            return bool(self._secure)
        # Behind a TLS-terminating proxy the request arrives over plain HTTP; the proxy says so.
        return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"

    # --- pages and actions ----------------------------------------------------------------

    def _page_handler(self, page: Page) -> Any:
        async def handler(request: web.Request, session: ConsoleSession) -> web.StreamResponse:
            variables = await page.load(self.context, request.query)
            flash = self._flashes.pop(session.id, None)
            return await self._render(request, page.template, {
                **variables, "page": page, "flash": flash, "csrf": session.csrf,
                "operator": session.operator})
        return handler

    def _action_handler(self, page: Page, action: Action) -> Any:
        async def handler(request: web.Request, session: ConsoleSession) -> web.StreamResponse:
            form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
            outcome = await action.run(self.context, request.match_info, form)
            await self._audit(AuditEntry(
                sender=session.operator, decision=f"console:{action.name}",
                outcome="ok" if outcome.ok else "refused",
                detail=_action_detail(request.match_info, outcome.message)))
            self._flashes[session.id] = outcome
            self._flashes.move_to_end(session.id)
            while len(self._flashes) > MAX_FLASHES:
                self._flashes.popitem(last=False)
            return _see_other(page.path)
        return handler

    async def _audit(self, entry: AuditEntry) -> None:
        async with self.context.services.store.transaction() as tx:
            await write_audit(tx, entry)

    def _reader(self, request: web.Request) -> Translator:
        """The operator's language for this request (see the module's docstring)."""
        hint = from_accept_language(request.headers.get("Accept-Language"))
        return self.context.services.languages.translator(str(TERMINAL_SENDER), hint)

    async def _render(self, request: web.Request, name: str, variables: dict[str, Any],
                      status: int = 200) -> web.Response:
        tr = self._reader(request)
        base = {"pages": self.pages, "page": None, "flash": None, "csrf": "", "operator": None,
                "tr": tr, "_": tr._, "ngettext": tr.ngettext}
        template = self._env.get_template(name)
        # Rendering cost grows with what is shown (previews, audit details): off the loop.
        html = await asyncio.to_thread(template.render, **{**base, **variables})
        return web.Response(text=html, status=status, content_type="text/html",
                            headers={"Cache-Control": "no-store"})


def _action_detail(route: Mapping[str, str], message: str) -> str:
    """An action's audit detail, as read: what it acted on (the route's id, code…), then what
    it said ("He93g5XlQ_89IrBP: Denied by console:operator.")."""
    acted_on = " ".join(route.values())
    return (f"{acted_on}: {message}" if acted_on else message)[:300]


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


def _cross_site(request: web.Request) -> bool:
    """True when the browser says the form came from another site. Sec-Fetch-Site is the
    browser's own word; without it, Origin (which is "null" under no-referrer: no evidence,
    the CSRF token decides alone)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    if origin is None or origin == "null":
        return False
    return urlsplit(origin).netloc != request.host


async def _add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
