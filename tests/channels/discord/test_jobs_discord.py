"""Jobs on Discord end to end: /jobs with a Cancel button per job and a click that cancels;
a due reminder posted into the owner's channel — the real discord.py against the fake Discord."""

from __future__ import annotations

from bot.jobs.jobs import Job
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_at, parse_cron
from bot.jobs.scheduler import Scheduler
from tests.channels.discord.test_discord_e2e import (  # noqa: F401
    ALICE,
    ALICE_DM,
    BASE,
    STRANGER,
    bot,
    buttons,
    discord_fake,
)


async def test_slash_jobs_shows_a_cancel_button_and_a_click_cancels_only_for_the_owner(
        bot, discord_fake):  # noqa: F811
    app, _ = await bot()
    job = await app.services.jobs.create(Job(
        id="", owner=f"discord:{ALICE}", channel="discord", chat=str(ALICE_DM), name="standup",
        schedule=parse_cron("0 9 * * 1-5", timezone="UTC"), level="full", message="standup!"))
    await discord_fake.send_message(author_id=ALICE, content="/jobs", channel_id=ALICE_DM)
    listing = await discord_fake.wait_for_buttons(ALICE_DM)
    assert "standup" in listing["content"]
    custom_id = buttons(listing)["Cancel: standup"]
    assert custom_id == f"myclaw:cmd:/jobs cancel {job.id}"
    click = await discord_fake.click(message_id=int(listing["id"]), custom_id=custom_id,
                                     user_id=STRANGER)
    await discord_fake.wait_for(lambda: discord_fake.followups(click["token"]))
    assert (await app.services.jobs.get(job.id)).status == "active"
    click = await discord_fake.click(message_id=int(listing["id"]), custom_id=custom_id,
                                     user_id=ALICE)
    await discord_fake.wait_for(lambda: discord_fake.followups(click["token"]))
    (followup,) = discord_fake.followups(click["token"])
    assert "'standup' cancelled" in followup.json["content"]
    assert (await app.services.jobs.get(job.id)).status == "cancelled"


async def test_a_due_reminder_is_posted_in_the_owners_discord_channel(bot, discord_fake):  # noqa: F811
    app, channel = await bot()
    app.services.delivery.register("discord", channel)
    now = app.services.jobs.clock()
    await app.services.jobs.create(Job(
        id="", owner=f"discord:{ALICE}", channel="discord", chat=str(ALICE_DM), name="stretch",
        schedule=parse_at("in 1 minute", now=now, timezone="UTC"), level="full",
        message="Time to stretch!"))
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    scheduler = Scheduler(app.services.jobs, runner, clock=lambda: now + 61)
    assert await scheduler.tick() == 1
    await scheduler.drain()
    await discord_fake.wait_for_text(ALICE_DM, "⏰ stretch\nTime to stretch!")
    assert (await app.services.jobs.for_owner(f"discord:{ALICE}")) == []


ROLE_ONLY = 4_200_000_000_000_009   # in no [senders] entry: "Admins" gives them supervised


async def test_a_member_whose_level_comes_only_from_a_guild_role_creates_a_reminder_that_runs(
        bot, discord_fake, fake_anthropic):  # noqa: F811
    from tests.channels.discord.test_discord_e2e import GUILD, GUILD_CHANNEL
    from tests.fakes.anthropic_server import reply, text, tool_use

    app, channel = await bot()
    app.services.delivery.register("discord", channel)
    fake_anthropic.script(
        reply(text("Setting it."), tool_use("schedule", {"action": "create", "name": "tea",
                                                         "at": "in 5 minutes", "message": "Tea!"})),
        text("Done: tea in 5 minutes."))
    await discord_fake.send_message(author_id=ROLE_ONLY, content="remind me of tea",
                                    channel_id=GUILD_CHANNEL, guild_id=GUILD.id,
                                    roles=("Admins",), mentions_bot=True)
    await discord_fake.wait_for_text(GUILD_CHANNEL, "Done: tea in 5 minutes.")
    (job,) = await app.services.jobs.for_owner(f"discord:{ROLE_ONLY}")
    assert job.level == "supervised"
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    later = app.services.jobs.clock() + 301
    scheduler = Scheduler(app.services.jobs, runner, clock=lambda: later)
    assert await scheduler.tick() == 1
    await scheduler.drain()
    await discord_fake.wait_for_text(GUILD_CHANNEL, "⏰ tea\nTea!")


async def test_a_job_owned_by_a_role_only_member_runs_at_the_roles_level(bot, discord_fake):  # noqa: F811
    from tests.channels.discord.test_discord_e2e import GUILD_CHANNEL

    app, channel = await bot()
    job = Job(id="", owner=f"discord:{ROLE_ONLY}", channel="discord", chat=str(GUILD_CHANNEL),
              name="digest", schedule=parse_cron("0 9 * * *", timezone="UTC"), level="supervised",
              prompt="summarise")
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    assert await runner.level(job) == "supervised"
    # A member who never had a level (no role recorded with the job) stays without one.
    assert await runner.level(Job(**{**job.__dict__, "level": "pairing"})) is None
