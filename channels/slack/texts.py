"""Every sentence of the Slack channel that a person reads, in one place, so that the texts can
move into the translation catalogs without hunting through the modules. Placeholders are named
(`str.format`), never assembled from pieces elsewhere.
"""

from __future__ import annotations

# --- approvals ---------------------------------------------------------------------------------
APPROVAL_TITLE = "🔐 *Approval needed*"
APPROVAL_FIELDS = "*Tool:* `{tool}`\n*Risk:* {icon} {risk}\n*Requested by:* <@{user}> ({sender})"
APPROVAL_FIELDS_OTHER = "*Tool:* `{tool}`\n*Risk:* {icon} {risk}\n*Requested by:* {sender}"
APPROVAL_NOTIFICATION = "Approval needed: {tool} ({risk} risk)"
NO_SUMMARY = "(no summary)"
PREVIEW_IN_FILE = "The full preview ({chars:,} characters) is in the file above."
PREVIEW_FILE_TITLE = "Preview of {tool} waiting for approval"
PREVIEW_FILE_COMMENT = "🔎 The whole preview of the call waiting for approval (below)."
EXPIRES = "Expires at {clock}."
ALWAYS_EXPLAINED = "\"Always\" would allow {scope}, up to {risk} risk, until /new."
BUTTON_APPROVE = "Approve"
BUTTON_DENY = "Deny"
BUTTON_ALWAYS = "Always: {scope}"
OUTCOME_BY = "{icon} {label} by {who} at {clock}."
OUTCOME_EXPIRED = "⌛ Expired at {clock} — nothing ran."
OUTCOME_SUPERSEDED = "⌛ {label} — nothing ran."

# --- batches -----------------------------------------------------------------------------------
BATCH_TITLE = "🔐 *{title}: {total} calls*{span}"
BATCH_REQUESTED_BY = "*Requested by:* {sender}"
BATCH_CALL = "*{number}. `{tool}`* — {icon} {risk}"
BATCH_PREVIEW_IN_FILE = "The full preview of call {number} is in the file above."
BATCH_ALWAYS_EXPLAINED = "\"Always {number}\" would allow {scope}, up to {risk} risk, until /new."
BUTTON_APPROVE_ALL = "Approve all"
BUTTON_DENY_ALL = "Deny all"
BUTTON_APPROVE_N = "Approve {number}"
BUTTON_DENY_N = "Deny {number}"
BUTTON_ALWAYS_N = "Always {number}"
BATCH_NOTIFICATION = "Approval needed: {total} calls"

# --- taps --------------------------------------------------------------------------------------
INVALID_BUTTON = "This button is not valid any more."
WRONG_WORKSPACE = "This button belongs to another workspace."

# --- the channel -------------------------------------------------------------------------------
ERROR_LINE = "⚠️ {message}"
SOMETHING_WENT_WRONG = "⚠️ Something went wrong on my side. Nothing was lost; please try again."
DM_FAILED = ("I have something private for you, but I cannot message you directly. Please open a "
             "DM with me and write /start.")
NOT_HERE = "I don't answer in this channel."
TOOL_STARTED = "⚙️ {tool}…"
TOOL_PROGRESS = "⚙️ {tool}: {text}"
TOOL_OK = "✅ {tool}"
TOOL_FAILED = "⚠️ {tool}: {summary}"
TOOL_FAILED_DEFAULT = "failed"
FILE_ATTACHED = "[the user attached a file]"

# --- files in ----------------------------------------------------------------------------------
FILE_TOO_LARGE = "it is {size}; the limit is {limit}"
FILE_DOWNLOAD_FAILED = "the download from Slack failed; please send it again"
FILE_NOT_FROM_SLACK = "it is not stored on Slack"
FILE_HIDDEN = "Slack did not let me read it (external or hidden file)"
