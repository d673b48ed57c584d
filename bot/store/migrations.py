"""Numbered, append-only schema migrations. Never edit one that has shipped: add the next.

Each entry is (number, description, SQL script). `PRAGMA user_version` holds the last applied
number and the `migrations` table records when each ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.core.errors import StoreError

if TYPE_CHECKING:
    from bot.store.protocol import Store

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "sessions, history, approvals, receipts, audit, memory, pairing, undo, usage", """
CREATE TABLE IF NOT EXISTS migrations (
    number INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    sender TEXT NOT NULL,
    chat TEXT NOT NULL,
    channel TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX sessions_by_key ON sessions(sender, chat, active);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX messages_by_session ON messages(session_id, id);

CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    chat TEXT NOT NULL,
    channel TEXT NOT NULL,
    tool TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    args TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    risk TEXT NOT NULL,
    summary TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    resolved_by TEXT,
    resolved_at REAL,
    message_ref TEXT
);
CREATE INDEX approvals_by_status ON approvals(status, expires_at);

CREATE TABLE session_auto_approve (
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    PRIMARY KEY (session_id, tool)
);

CREATE TABLE receipts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result_hash TEXT NOT NULL,
    sender TEXT NOT NULL,
    approver TEXT,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    signature TEXT NOT NULL
);

CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    session_id TEXT,
    sender TEXT NOT NULL,
    tool TEXT,
    args_hash TEXT,
    decision TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_by_sender ON audit(sender, ts);

CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

CREATE TABLE pairing_codes (
    code TEXT PRIMARY KEY,
    sender TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    level TEXT,
    resolved_at REAL
);
CREATE INDEX pairing_by_sender ON pairing_codes(sender, created_at);

CREATE TABLE granted_senders (
    sender TEXT PRIMARY KEY,
    level TEXT NOT NULL,
    granted_at REAL NOT NULL,
    granted_by TEXT NOT NULL
);

CREATE TABLE undo_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at REAL NOT NULL,
    reverted_at REAL
);
CREATE INDEX undo_by_session ON undo_log(session_id, id);

CREATE TABLE usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    session_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL
);

CREATE TABLE tool_quota (
    sender TEXT NOT NULL,
    tool TEXT NOT NULL,
    day TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (sender, tool, day)
);
"""),
    (2, "approvals remember the autonomy level the request was made at", """
ALTER TABLE approvals ADD COLUMN autonomy TEXT;
"""),
    (3, "console: one-time login links and operator sessions (tokens stored hashed)", """
CREATE TABLE console_logins (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL
);
CREATE TABLE console_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash TEXT NOT NULL UNIQUE,
    operator TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    revoked_at REAL
);
"""),
    (4, "scheduled jobs, their runs, per-sender time zones; approvals keep a run's allowlist", """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    channel TEXT NOT NULL,
    chat TEXT NOT NULL,
    name TEXT NOT NULL,
    prompt TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    timezone TEXT NOT NULL,
    level TEXT NOT NULL,
    tools TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL DEFAULT 'active',
    next_run REAL,
    failures INTEGER NOT NULL DEFAULT 0,
    last_run REAL,
    last_outcome TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE INDEX jobs_due ON jobs(status, next_run);
CREATE INDEX jobs_by_owner ON jobs(owner, status);
CREATE TABLE job_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    scheduled_for REAL NOT NULL,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    detail TEXT NOT NULL DEFAULT '',
    UNIQUE (job_id, scheduled_for)
);
CREATE INDEX job_runs_by_status ON job_runs(status, started_at);
CREATE TABLE sender_settings (
    sender TEXT PRIMARY KEY,
    timezone TEXT
);
ALTER TABLE approvals ADD COLUMN allowlist TEXT;
"""),
    (5, "grants: what an Always tap allows (tool, scope, max risk, expiry); approvals keep the scope", """
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    tool TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    scope_label TEXT NOT NULL,
    max_risk TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    approval_id TEXT,
    granted_by TEXT NOT NULL,
    revoked_at REAL
);
CREATE INDEX grants_by_session ON grants(session_id, expires_at);
ALTER TABLE approvals ADD COLUMN scope_key TEXT;
ALTER TABLE approvals ADD COLUMN scope_label TEXT;
"""),
    (6, "pairing codes remember where the stranger asked (to tell them) and whether they were nudged", """
ALTER TABLE pairing_codes ADD COLUMN channel TEXT NOT NULL DEFAULT '';
ALTER TABLE pairing_codes ADD COLUMN chat TEXT NOT NULL DEFAULT '';
ALTER TABLE pairing_codes ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
ALTER TABLE pairing_codes ADD COLUMN nudged INTEGER NOT NULL DEFAULT 0;
"""),
    (7, "every message that shows an approval request (the requester's and approvers' copies)", """
CREATE TABLE approval_messages (
    approval_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    ref TEXT NOT NULL,
    PRIMARY KEY (approval_id, ref)
);
"""),
    (8, "usage rows carry their cost; indexes for per-sender and per-day spend", """
ALTER TABLE usage ADD COLUMN cost REAL;
CREATE INDEX usage_by_sender_ts ON usage(sender, ts);
CREATE INDEX usage_by_ts ON usage(ts);
"""),
    (9, "attachments stored once by content hash; uploads saved to each sender's inbox", """
CREATE TABLE attachments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    hash TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at REAL NOT NULL
);

CREATE TABLE inbox_files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sender TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX inbox_files_by_sender ON inbox_files(sender);
"""),
    (10, "the durable inbox: every update stored before it is acknowledged, claimed to run once", """
CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    update_key TEXT NOT NULL,
    conversation TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL,
    claimed_by TEXT,
    lease_until REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    received_at REAL NOT NULL,
    done_at REAL,
    UNIQUE (channel, update_key)
);
CREATE INDEX inbox_by_conversation ON inbox(conversation, state, id);
CREATE INDEX inbox_by_state ON inbox(state, channel, id);
CREATE INDEX inbox_done ON inbox(done_at);
"""),
    (11, "history rows name the person whose words they hold (shared chat sessions)", """
ALTER TABLE messages ADD COLUMN sender TEXT;
"""),
    (12, "turns with an explicit state; audit rows name their turn, call and approval (write-ahead)", """
CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    chat TEXT NOT NULL,
    channel TEXT NOT NULL,
    level TEXT NOT NULL,
    allowlist TEXT,
    inbox_id INTEGER UNIQUE,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    incarnation TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX turns_by_state ON turns(state, owner);
CREATE INDEX turns_by_session ON turns(session_id, state);
ALTER TABLE audit ADD COLUMN turn_id TEXT;
ALTER TABLE audit ADD COLUMN call_id TEXT;
ALTER TABLE audit ADD COLUMN approval_id TEXT;
CREATE INDEX audit_by_call ON audit(call_id);
"""),
    (13, "approval requests asked together in one model step share a batch (and keep their order)", """
ALTER TABLE approvals ADD COLUMN batch TEXT;
ALTER TABLE approvals ADD COLUMN batch_position INTEGER NOT NULL DEFAULT 0;
CREATE INDEX approvals_by_batch ON approvals(batch, status);
"""),
    (14, "rate-limit buckets and once-only notices shared by every process on the store", """
CREATE TABLE rate_buckets (
    sender TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    updated REAL NOT NULL,
    noticed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE notices_sent (
    key TEXT PRIMARY KEY,
    sent_at REAL NOT NULL
);
CREATE INDEX notices_sent_by_time ON notices_sent(sent_at);
"""),
    (15, "messages a platform would not deliver yet, held until the person can be reached again", """
CREATE TABLE held_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    reason TEXT NOT NULL,
    approval_id TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX held_messages_by_recipient ON held_messages(recipient, id);
"""),
    (16, "a job run waits for its channel: deferred runs, their retry time, who claimed a run", """
ALTER TABLE jobs ADD COLUMN retry_at REAL;
ALTER TABLE job_runs ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE job_runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
"""),
    (17, "voice replies: each sender's /voice choice; usage rows count the characters spoken", """
ALTER TABLE sender_settings ADD COLUMN voice TEXT;
ALTER TABLE usage ADD COLUMN characters INTEGER NOT NULL DEFAULT 0;
"""),
    (18, "messages sent on WhatsApp, so a failure reported later is retried or told after a restart", """
CREATE TABLE whatsapp_sent (
    message_id TEXT PRIMARY KEY,
    recipient TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    payload TEXT NOT NULL,
    retried INTEGER NOT NULL DEFAULT 0,
    sent_at REAL NOT NULL
);
CREATE INDEX whatsapp_sent_by_time ON whatsapp_sent(sent_at);
"""),
    (19, "a turn names who else reads its conversation (a group works in its own folder)", """
ALTER TABLE turns ADD COLUMN audience TEXT NOT NULL DEFAULT '';
"""),
    (20, "a job names who else reads the chat it posts in (its runs work in a group's folder)", """
ALTER TABLE jobs ADD COLUMN audience TEXT NOT NULL DEFAULT '';
"""),
    (21, "each person's language: the one they chose with /language and the platform's last hint", """
ALTER TABLE sender_settings ADD COLUMN language TEXT;
ALTER TABLE sender_settings ADD COLUMN language_hint TEXT;
"""),
    (22, "a job may name its own model, and its turns keep it (a tap or a restart goes on in it)", """
ALTER TABLE jobs ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN model TEXT NOT NULL DEFAULT '';
"""),
    (23, "an approval's preview keeps its words as a message, so each reader gets their language", """
ALTER TABLE approvals ADD COLUMN summary_data TEXT;
"""),
    (24, "what an Always covers keeps its words as a message too (requests and grants)", """
ALTER TABLE approvals ADD COLUMN scope_data TEXT;
ALTER TABLE grants ADD COLUMN scope_data TEXT;
"""),
]


def latest() -> int:
    """The schema version this myclaw brings its stores to."""
    return max(number for number, _, _ in MIGRATIONS)


def refuse_newer(version: int, where: str) -> None:
    """A store of a newer myclaw is never written by this one (its schema would be misread)."""
    if version > latest():
        raise StoreError(f"the store at {where} has schema version {version}, newer than this "
                         f"myclaw knows ({latest()}): upgrade myclaw, or point [store] path / "
                         "MYCLAW_DATABASE_URL at another store")


async def applied_since(store: Store, since: float) -> list[dict[str, Any]]:
    """The migrations this store recorded applying at or after `since`, in order."""
    rows = await store.fetchall("SELECT number, description FROM migrations"
                                " WHERE applied_at >= ? ORDER BY number", (since,))
    return [dict(row) for row in rows]
