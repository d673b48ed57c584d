"""Every sentence the WhatsApp channel shows a person, in one place (for the translation catalogs).

Placeholders are `str.format` fields; callers fill them and never assemble sentences themselves.
"""

from __future__ import annotations

# --- approvals -------------------------------------------------------------------------------
APPROVAL_TITLE = "🔐 *Approval needed*"
APPROVAL_TOOL = "Tool: {tool}"
APPROVAL_RISK = "Risk: {icon} {risk}"
APPROVAL_REQUESTER = "Requested by: {sender}"
APPROVAL_NO_SUMMARY = "(no summary)"
APPROVAL_PREVIEW_ABOVE = "(the full preview is in the message above)"
APPROVAL_PREVIEW_DOCUMENT = "(the full preview is in the document above)"
APPROVAL_EXPIRES = "Expires at {clock}."
APPROVAL_ALWAYS = "\"Always\" would allow {scope}, up to {risk} risk, until /new."
APPROVAL_PREVIEW_HEAD = "🔎 Full preview of the call waiting for approval ({tool}):"
APPROVAL_PREVIEW_PART = "🔎 Preview {n}/{total} of the call waiting for approval ({tool}):"
APPROVAL_PREVIEW_CAPTION = "Full preview of the call waiting for approval ({tool})"
APPROVAL_FALLBACK = ("Reply /approve {id} to allow it or /deny {id} to refuse "
                     "(expires at {clock}).")
BUTTON_APPROVE = "Approve"
BUTTON_DENY = "Deny"
BUTTON_ALWAYS = "Always"
OUTCOME = "{icon} {label} by {who} at {clock}."
OUTCOME_EXPIRED = "⌛ Expired at {clock} — nothing ran."
OUTCOME_SUPERSEDED = "⌛ Cancelled (a newer message arrived) — nothing ran."
BATCH_TITLE = "🔐 *Approval needed: {total} calls* (requested by {sender})"
BATCH_CALL = "Call {number} of {total}"
BATCH_LIST_BODY = "Answer all {total} calls at once, or each card on its own."
BATCH_LIST_BUTTON = "Answer all"
BATCH_APPROVE_ALL = "Approve all"
BATCH_DENY_ALL = "Deny all"
BUTTON_NOT_VALID = "This button is not valid any more."

# --- the 24-hour window ------------------------------------------------------------------------
NOT_DELIVERED = "not delivered: outside WhatsApp's 24-hour window"
HELD_INTRO = ("While WhatsApp did not let me write to you (more than 24 hours since your last "
              "message), this could not be delivered:")
HELD_APPROVAL = "A request still waits for your approval; here it is again."
TEMPLATE_APPROVAL = ("{text}\n\nReply to this message to see the Approve / Deny buttons.")
TEMPLATE_MORE = "… (reply to see the rest)"
FAILED_REPLY = ("My last message did not reach you (WhatsApp said: {reason}). "
                "Here it is again:")

# --- messages in -------------------------------------------------------------------------------
# Shown as "I could not fetch <name>: <reason>" by the core (no model call is made).
STICKER_NAME = "a sticker"
STICKER_REFUSED = "I can only read text, photos, documents and voice notes"
LOCATION_NAME = "a shared location"
LOCATION_REFUSED = "I can't use a shared location; tell me the place in words, if it helps"
UNSUPPORTED_NAME = "a {kind} message"
UNSUPPORTED_REFUSED = "please send text, a photo, a document or a voice note instead"
MEDIA_TOO_LARGE = "it is {size}; the limit is {limit}"
MEDIA_FAILED = "the download from WhatsApp failed; please send it again"
SOMETHING_WRONG = "⚠️ Something went wrong on my side. Nothing was lost; please try again."
ERROR_LINE = "⚠️ {message}"
BUTTONS_BODY = "Choose:"
REPLYING_TO = "(replying to your message «{quoted}»)"
FORWARDED_BY = "someone else (forwarded on WhatsApp)"
VOICE_NOTE = "🔊 voice reply"   # what the sent-message record says of a voice note
