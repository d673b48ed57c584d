"""The sentences only the WhatsApp channel says, marked for the catalog (`N_`) and rendered where
they are shown, with the reader's translator (`tr._(texts.X, **values)`). Sentences every
channel says (Approve, "Expires at {time}.", outcomes, batch headings) are the shared catalog
messages, written where they are used, so one translation serves every channel. WhatsApp's
marks (`*bold*`, ``` fences) stay in the catalog's text: translations keep them.

A few texts are not for a person and stay English: what the job record and the logs say of an
undelivered message, and the words the model reads around a quoted or forwarded message.
"""

from __future__ import annotations

from bot.language.catalogs import N_

# --- approvals -------------------------------------------------------------------------------
BATCH_CALL = N_("Call {number} of {total}")
PREVIEW_ABOVE = N_("(the full preview is in the message above)")
PREVIEW_DOCUMENT = N_("(the full preview is in the document above)")
PREVIEW_HEAD = N_("🔎 Full preview of the call waiting for approval ({tool}):")
PREVIEW_CAPTION = N_("Full preview of the call waiting for approval ({tool})")
BATCH_LIST_BUTTON = N_("Answer all")        # a list's button (20) and its section title (24)
BATCH_REQUESTED = N_("(requested by {who})")

# --- the 24-hour window ------------------------------------------------------------------------
HELD_INTRO = N_("While WhatsApp did not let me write to you (more than 24 hours since your last "
                "message), this could not be delivered:")
HELD_APPROVAL = N_("A request still waits for your approval; here it is again.")
TEMPLATE_APPROVAL = N_("{text}\n\nReply to this message to see the Approve / Deny buttons.")
TEMPLATE_MORE = N_("… (reply to see the rest)")
FAILED_REPLY = N_("My last message did not reach you (WhatsApp said: {reason}). Here it is again:")

# --- messages in (the core says "I could not fetch <name>: <reason>"; no model call is made) ----
STICKER_NAME = N_("a sticker")
STICKER_REFUSED = N_("I can only read text, photos, documents and voice notes")
LOCATION_NAME = N_("a shared location")
LOCATION_REFUSED = N_("I can't use a shared location; tell me the place in words, if it helps")
UNSUPPORTED_NAME = N_("a {kind} message")
UNSUPPORTED_REFUSED = N_("please send text, a photo, a document or a voice note instead")
MEDIA_TOO_LARGE = N_("it is {size}; the limit is {limit}")
MEDIA_OVER = N_("over {size}")
MEDIA_FAILED = N_("the download from WhatsApp failed; please send it again")
SOMETHING_WRONG = N_("⚠️ Something went wrong on my side. Nothing was lost; please try again.")
BUTTONS_BODY = N_("Choose:")     # a list's button (20) and its section title (24)

# --- not for a person: the job record, the logs, the model -------------------------------------
NOT_DELIVERED = "not delivered: outside WhatsApp's 24-hour window"
QUOTED_FROM = "this bot, in an earlier {kind} message (it may repeat outside content)"
FORWARDED_BY = "someone else (forwarded on WhatsApp)"
VOICE_NOTE = "🔊 voice reply"   # what the sent-message record says of a voice note
