"""The WhatsApp channel (the official WhatsApp Business Cloud API): one module per concern.

    channel    start and stop, routing stored updates to the agent, approval outcomes
    webhook    Meta's subscription check and signed deliveries (a route on the shared listener)
    intake     deliveries into the durable inbox, run in order per person
    reading    a stored message as the agent's IncomingMessage; taps told apart
    media      attachments through the Graph API media endpoint
    graph      the Graph API transport (aiohttp)
    rendering  model Markdown to WhatsApp formatting, splitting long replies
    sending    text, files, interactive messages and templates; the 24-hour window
    sink       one turn's events rendered in one chat
    approvals  how an approval card and its outcome look; button ids
    taps       a tap on a button
    followups  status callbacks, and what the window held back
    texts      every sentence shown to a person
    doctor     `myclaw doctor --whatsapp`
"""

from channels.whatsapp import doctor
from channels.whatsapp.channel import WhatsAppChannel, check_config, check_token, create, exclusive_locks

__all__ = ["WhatsAppChannel", "check_config", "check_token", "create", "doctor", "exclusive_locks"]
