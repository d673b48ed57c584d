"""The sentences only the Slack channel says, marked for the catalog (`N_`) and rendered where
they are shown, with the reader's translator (`tr._(texts.X, **values)`). Sentences every
channel says (Approve, "Expires at {time}.", outcomes, batch headings) are the shared catalog
messages, written where they are used, so one translation serves every channel. Slack mrkdwn
marks (`*bold*`, backticks) stay in the catalog's text: translations keep them.
"""

from __future__ import annotations

from bot.language.catalogs import N_

# --- approvals ---------------------------------------------------------------------------------
APPROVAL_NOTIFICATION = N_("Approval needed: {tool} ({risk} risk)")
PREVIEW_FILE_TITLE = N_("Preview of {tool} waiting for approval")
PREVIEW_FILE_COMMENT = N_("🔎 The whole preview of the call waiting for approval (below).")

# --- batches -----------------------------------------------------------------------------------
BATCH_PREVIEW_IN_FILE = N_("The full preview of call {number} is in the file above.")
BUTTON_ALWAYS_N = N_("Always {number}")      # what it allows is said above the buttons

# --- taps and the channel ----------------------------------------------------------------------
WRONG_WORKSPACE = N_("This button belongs to another workspace.")
SOMETHING_WENT_WRONG = N_("⚠️ Something went wrong on my side. Nothing was lost; please try again.")
NOT_HERE = N_("I don't answer in this channel.")

# --- files in (the core says "I could not fetch <name>: <reason>") -----------------------------
FILE_TOO_LARGE = N_("it is {size}; the limit is {limit}")
FILE_OVER = N_("over {size}")
FILE_DOWNLOAD_FAILED = N_("the download from Slack failed; please send it again")
FILE_NOT_FROM_SLACK = N_("it is not stored on Slack")
FILE_HIDDEN = N_("Slack did not let me read it (external or hidden file)")
