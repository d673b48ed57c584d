"""The console's pages, in menu order.

A page is a module with `PAGE = Page(...)` (bot/ops/console/web.py) and a template in
bot/ops/console/templates/. Adding one is that module, its template and one line below; the server
gives it the session check, CSRF, audit and the security headers.
"""

from bot.ops.console.pages import (
    approvals,
    audit,
    grants,
    health,
    jobs,
    pairing,
    receipts,
    senders,
    usage,
)

PAGES = (approvals.PAGE, pairing.PAGE, senders.PAGE, grants.PAGE, jobs.PAGE, audit.PAGE, receipts.PAGE,
         usage.PAGE, health.PAGE)
