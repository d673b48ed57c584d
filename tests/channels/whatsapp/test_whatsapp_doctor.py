"""`myclaw doctor --whatsapp` against the fake Graph API: the token and phone number id, the
webhook subscription, the secrets and the templates, one line each; a wrong token fails."""

from __future__ import annotations

import io

from bot.ops.cli.doctor import run_doctor
from tests.channels.whatsapp.conftest import whatsapp_env, whatsapp_overrides
from tests.conftest import FAKE_ENV, make_config


async def doctor(config) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await run_doctor(config, whatsapp=True, out=out)
    return code, [line for line in out.getvalue().splitlines() if "whatsapp" in line.lower()]


async def test_a_working_setup_reports_the_number_and_the_subscription(tmp_path, wa):
    config = make_config(tmp_path, whatsapp_overrides(
        wa, business_account_id="waba1", templates={"reminder": "r", "job": "j", "approval": "a"}),
        env={**FAKE_ENV, **whatsapp_env(wa)})
    code, lines = await doctor(config)
    assert "ok   whatsapp phone number: token accepted: myclaw test (+1 555-0100)" in lines
    assert "ok   whatsapp webhook subscription: subscribed: myclaw test app" in lines
    assert any(line.startswith("ok   whatsapp templates") for line in lines)
    assert not any(line.startswith("FAIL") for line in lines) and code == 0
    assert wa.token not in "\n".join(lines)


async def test_a_wrong_token_fails_and_missing_templates_warn(tmp_path, wa):
    env = {**FAKE_ENV, **whatsapp_env(wa), "WHATSAPP_ACCESS_TOKEN": "EAAwrong"}
    config = make_config(tmp_path, whatsapp_overrides(wa), env=env)
    code, lines = await doctor(config)
    assert code == 1
    assert any(line.startswith("FAIL whatsapp phone number") and "Invalid OAuth" in line
               for line in lines)
    assert any(line.startswith("warn whatsapp webhook subscription") for line in lines)
    assert any(line.startswith("warn whatsapp templates") and "held" in line for line in lines)
