"""The Slack channel (slack-bolt async, slack-sdk): one module per concern.

    channel      routing envelopes to the agent; start and stop
    intake       envelopes into the durable inbox, then into Bolt's listeners
    socket_mode  Socket Mode (the default: no public URL)
    events       the Events API endpoint (signature checked before parsing)
    reading      which messages are for the bot, read as the agent's IncomingMessage
    groups       Slack user groups as roles
    rendering    model Markdown to mrkdwn, splitting long replies
    sending      posting, updating, uploading with plain-text fallback (SDK retry handlers)
    live         streamed answers (chat.startStream/appendStream/stopStream, or chat.update)
    sink         one turn's events rendered in one conversation (a DM or a thread)
    approvals    an approval request as a Block Kit card; its outcome
    batch        several calls of one step on one card
    taps         a tap on a button
    media        files in, downloaded with the bot token
    doctor       `myclaw doctor --slack`
    texts        every sentence a person reads
"""

from channels.slack.channel import SlackChannel, create, exclusive_locks
from channels.slack.channel import tokens as check_config
from channels.slack.doctor import check_slack

__all__ = ["SlackChannel", "check_config", "check_slack", "create", "exclusive_locks"]
