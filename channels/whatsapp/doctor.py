"""`myclaw doctor --whatsapp`: the token, the phone number id, the webhook subscription, the
secrets and the templates, each as one finding (status, name, detail); no secret is printed."""

from __future__ import annotations

from bot.core.ports import ChannelConfig
from channels.whatsapp.channel import REQUIRED, graph_for
from channels.whatsapp.graph import GraphError

Finding = tuple[str, str, str]   # ("ok" | "warn" | "FAIL", name, detail)
KINDS = ("reminder", "job", "approval")


async def diagnose(config: ChannelConfig) -> list[Finding]:
    section = config["whatsapp"]
    found: list[Finding] = []
    for name, what in REQUIRED:
        found.append(("ok", name, "set") if config.secret(name)
                     else ("FAIL", name, f"not set: export {what}"))
    token = config.secret("WHATSAPP_ACCESS_TOKEN")
    if not token or not str(section["phone_number_id"]).strip():
        found.append(("FAIL", "whatsapp phone number", "needs WHATSAPP_ACCESS_TOKEN and "
                      "[whatsapp] phone_number_id"))
        return found + _templates(config)
    graph = graph_for(config, token)
    await graph.open()
    try:
        found.append(await _number(graph))
        found.append(await _subscription(graph, str(section["business_account_id"]).strip()))
    finally:
        await graph.close()
    return found + _templates(config)


async def _number(graph) -> Finding:
    try:
        number = await graph.phone_number()
    except GraphError as exc:
        return ("FAIL", "whatsapp phone number", f"the Graph API refused the token or the phone "
                f"number id {graph.phone_number_id}: {exc}")
    return ("ok", "whatsapp phone number", f"token accepted: {number.get('verified_name', '?')} "
            f"({number.get('display_phone_number', '?')})")


async def _subscription(graph, account: str) -> Finding:
    if not account:
        return ("warn", "whatsapp webhook subscription", "cannot check: set [whatsapp] "
                "business_account_id (WhatsApp → API setup) to see whether the app receives "
                "this number's messages")
    try:
        apps = await graph.subscribed_apps(account)
    except GraphError as exc:
        return ("FAIL", "whatsapp webhook subscription", f"cannot read the subscriptions of "
                f"business account {account}: {exc}")
    if not apps:
        return ("FAIL", "whatsapp webhook subscription", f"no app is subscribed to business "
                f"account {account}: no message will reach the webhook (subscribe the app in "
                "the Meta app's WhatsApp → Configuration)")
    names = ", ".join(str((a.get("whatsapp_business_api_data") or {}).get("name", "?"))
                      for a in apps)
    return ("ok", "whatsapp webhook subscription", f"subscribed: {names}")


def _templates(config: ChannelConfig) -> list[Finding]:
    templates = config["whatsapp"]["templates"]
    missing = [kind for kind in KINDS if not templates.get(kind)]
    if not missing:
        return [("ok", "whatsapp templates", "reminders, job results and approvals reach people "
                 "outside the 24-hour window")]
    return [("warn", "whatsapp templates", f"none for {', '.join(missing)}: outside WhatsApp's "
             "24-hour window those are held until the person writes again")]
