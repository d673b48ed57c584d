"""The console's pages, in menu order.

A page is a module with `PAGE = Page(...)` (bot/console/web.py) and a template in
bot/console/templates/. Adding one — grants with Revoke, scheduled jobs with Cancel / Pause,
once their tables exist — is that module, its template and one line below; the server gives it
the session check, CSRF, audit and security headers.
"""

from bot.console.pages import approvals, audit, health, pairing, receipts, senders, usage

PAGES = (approvals.PAGE, pairing.PAGE, senders.PAGE, audit.PAGE, receipts.PAGE, usage.PAGE,
         health.PAGE)
