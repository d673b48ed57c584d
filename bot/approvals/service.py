"""Approval requests: persisted before they are shown, resolved exactly once.

The store is the only source of truth. A request is written (status 'pending') before the
channel shows its buttons, and a tap wins only through a compare-and-set UPDATE inside one
`BEGIN IMMEDIATE` transaction — so exactly one tap can ever win, across coroutines, store
connections and process restarts. Every attempt, won or refused, leaves an audit row.

    pending ──approve/always──▶ approved ──▶ started ──▶ executed | failed
                                                    └──▶ in_doubt (the process died while it ran)
       │──deny──────────────▶ denied
       └──timeout / new message──▶ expired   (resolved_by 'superseded' for a new message)

Several requests asked in one model step form a batch: each is answered on its own (or all
pending ones at once), and nothing of the batch runs until every request is decided; the answer
that decides the last one says so (`Resolution.batch_done`), exactly once. A batch that lapses,
or that a new message supersedes, before then closes whole: its approved requests never run.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from bot.approvals.grants import Grants, Scope
from bot.approvals.records import (
    CHOICES,
    UNKNOWN_REQUEST,
    ApprovalRequest,
    Resolution,
    Status,
    answer_audit,
    closed_reason,
    from_row,
)
from bot.core.approval_cards import SUPERSEDED, looks_like_id
from bot.core.identity import in_terminal
from bot.core.tool import args_hash
from bot.language.catalogs import N_
from bot.language.phrase import Phrase, plural_phrase, stored_words
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store, Transaction

log = logging.getLogger(__name__)

ALTERED = Phrase("This request was altered after it was shown; it cannot be approved. Ask again.")
ANSWERED = Phrase("This request was already answered.")


_THEIRS = N_("This shares {sender}'s own private data with the conversation: only {sender} "
             "can approve it (you can deny it).")

class Approvals:
    """The approval service. Keeps no per-request state: everything lives in the store."""

    def __init__(self, store: Store, *, timeout_seconds: float = 300,
                 approvers: Collection[str] = (), clock: Callable[[], float] = time.time,
                 grants: Grants | None = None, requester_only: Collection[str] = ()):
        """`requester_only`: tools whose calls show the requester's own private data to
        others (`ToolMeta.discloses`): only the requester may approve them (anyone who may
        answer can deny)."""
        self.store = store
        self.requester_only = frozenset(requester_only)
        self.grants = grants or Grants(store, clock=clock)
        self.timeout_seconds = float(timeout_seconds)
        self.approvers = frozenset(approvers)
        self.clock = clock

    # --- who may answer: decided here, and only here -------------------------------------

    def is_approver(self, who: str) -> bool:
        """May `who` answer (and act on) anyone's requests: a configured approver (the web
        console is one only while it is enabled), or the person at the bot's own terminal."""
        return who in self.approvers or in_terminal(who)

    def may_answer(self, request: ApprovalRequest, who: str) -> bool:
        """The person who asked answers their own request; an approver answers anyone's."""
        return who == request.sender or self.is_approver(who)

    def _not_theirs(self, resolver: str, choice: str, requests: list[Any]) -> bool:
        """Would `resolver` approve a call showing someone else's private data?"""
        return choice != "deny" and any(r.tool in self.requester_only and resolver != r.sender
                                        for r in requests)

    # --- creation and lookup -------------------------------------------------------------

    async def create(self, *, session_id: str, sender: str, chat: str, channel: str, tool: str,
                     tool_use_id: str, args: dict[str, Any], risk: str,
                     summary: str, autonomy: str | None = None,
                     allowlist: frozenset[str] | None = None,
                     scope: Scope | None = None, batch: str | None = None,
                     position: int = 0) -> ApprovalRequest:
        """`autonomy` is the sender's level when asking (it may come from Discord roles, which
        are not known when the tap arrives); the resumed call is judged at that level."""
        now = self.clock()
        request = ApprovalRequest(
            id=secrets.token_urlsafe(12), session_id=session_id, sender=sender, chat=chat,
            channel=channel, tool=tool, tool_use_id=tool_use_id, args=dict(args),
            args_hash=args_hash(args), risk=risk, summary=summary, status="pending",
            created_at=now, expires_at=now + self.timeout_seconds, autonomy=autonomy,
            allowlist=allowlist, scope=scope, batch=batch, position=position,
        )
        async with self.store.transaction() as tx:
            await tx.execute(
                "INSERT INTO approvals(id, session_id, sender, chat, channel, tool, tool_use_id,"
                " args, args_hash, risk, summary, status, created_at, expires_at, autonomy,"
                " allowlist, scope_key, scope_label, batch, batch_position, summary_data,"
                " scope_data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (request.id, session_id, sender, chat, channel, tool, tool_use_id,
                 json.dumps(request.args, ensure_ascii=False), request.args_hash, risk,
                 str(summary),
                 request.created_at, request.expires_at, autonomy,
                 None if allowlist is None else json.dumps(sorted(allowlist)),
                 scope.key if scope else None, str(scope.label) if scope else None, batch,
                 position, stored_words(summary), stored_words(scope.label) if scope else None),
            )
        return request

    @staticmethod
    def new_batch() -> str:
        """The id shared by the requests of one step (shaped like a request id: it travels in
        button data the same way)."""
        return secrets.token_urlsafe(12)

    async def batch_members(self, batch: str) -> list[ApprovalRequest]:
        """Every request of a batch, in the model's order."""
        if not looks_like_id(batch):
            return []
        rows = await self.store.fetchall(
            "SELECT * FROM approvals WHERE batch = ? ORDER BY batch_position", (batch,))
        return [from_row(row) for row in rows]

    async def get(self, approval_id: str) -> ApprovalRequest | None:
        if not looks_like_id(approval_id):
            return None
        row = await self.store.fetchone("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return from_row(row) if row else None

    # --- resolution ------------------------------------------------------------------------

    async def resolve(self, approval_id: str, resolver: str, choice: str) -> Resolution:
        """One tap. Exactly one caller can ever get ok=True for a given request."""
        if choice not in CHOICES:
            resolution = Resolution(False, Phrase("Unknown answer; use approve, deny or always."))
            await self._audit_refusal(approval_id, resolver, choice, resolution)
            return resolution
        if not looks_like_id(approval_id):
            resolution = Resolution(False, UNKNOWN_REQUEST)
            await self._audit_refusal(approval_id, resolver, choice, resolution)
            return resolution
        async with self.store.transaction() as tx:
            resolution = await self._resolve_in(tx, approval_id, resolver, choice)
            await self._audit(tx, approval_id, resolver, choice, resolution)
        return resolution

    async def _resolve_in(self, tx: Transaction, approval_id: str, resolver: str,
                          choice: str) -> Resolution:
        now = self.clock()
        row = await tx.fetchone("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        if row is None:
            return Resolution(False, UNKNOWN_REQUEST)
        request = from_row(row)
        if not self.may_answer(request, resolver):
            return Resolution(False, Phrase("Only {who} or an approver can answer this request.",
                                            who=request.sender), request.status, request)
        if self._not_theirs(resolver, choice, [request]):
            return Resolution(False, Phrase(_THEIRS, sender=request.sender), request.status,
                              request)
        if request.status != "pending":
            return Resolution(False, closed_reason(request, now), request.status, request)
        if request.expires_at <= now:
            return await self._lapse(tx, request, now)
        if choice == "always" and request.scope is None:
            return Resolution(False, Phrase("\"Always\" is not offered for this request; "
                                            "approve it once instead."), request.status, request)
        if not request.args_intact:
            return Resolution(False, ALTERED, request.status, request)
        status: Status = "denied" if choice == "deny" else "approved"
        changed = await tx.execute(
            "UPDATE approvals SET status = ?, resolved_by = ?, resolved_at = ?"
            " WHERE id = ? AND status = 'pending' AND expires_at > ?",
            (status, resolver, now, approval_id, now))
        if changed != 1:  # cannot happen under BEGIN IMMEDIATE; refuse rather than guess
            return Resolution(False, ANSWERED, None, request)
        said = (Phrase("Denied by {who}.", who=resolver) if choice == "deny"
                else Phrase("Approved by {who}.", who=resolver))
        if choice == "always" and request.scope is not None:
            grant = await self.grants.add(
                tx, session_id=request.session_id, sender=request.sender, tool=request.tool,
                scope=request.scope, risk=request.risk, by=resolver, approval_id=request.id)
            said = Phrase("Approved, and always {scope} in this chat, by {who}.",
                          scope=grant.scope_label, who=resolver)
        request.status, request.resolved_by, request.resolved_at = status, resolver, now
        done = request.batch is not None and not await tx.fetchone(
            "SELECT id FROM approvals WHERE batch = ? AND status = 'pending' LIMIT 1",
            (request.batch,))
        return Resolution(True, said, status, request, batch_done=done, decided=(request,))

    async def _lapse(self, tx: Transaction, request: ApprovalRequest, now: float) -> Resolution:
        """A tap found the request past its expiry: close it (its whole batch, if any)."""
        if request.batch is None:
            await tx.execute(
                "UPDATE approvals SET status = 'expired', resolved_at = ?"
                " WHERE id = ? AND status = 'pending'", (now, request.id))
            request.status, request.resolved_at = "expired", now
            closed = [request]
        else:
            closed = await _close_batches(tx, [request.batch], now)
            request.status, request.resolved_at = "expired", now
        return Resolution(False, closed_reason(request, now), "expired", request,
                          lapsed_now=True, lapsed=tuple(closed))

    async def resolve_batch(self, batch: str, resolver: str, choice: str) -> Resolution:
        """"Approve all" / "Deny all": every request of the batch still pending, in one
        compare-and-set (a request answered on its own meanwhile keeps its answer)."""
        if choice not in ("approve", "deny") or not looks_like_id(batch):
            resolution = Resolution(False, UNKNOWN_REQUEST if choice in ("approve", "deny")
                                    else Phrase("Unknown answer; use approve or deny."))
            await self._audit_refusal(batch, resolver, f"{choice}-all", resolution)
            return resolution
        async with self.store.transaction() as tx:
            resolution = await self._resolve_batch_in(tx, batch, resolver, choice)
            if resolution.ok:
                for request in resolution.decided:
                    await self._audit(tx, request.id, resolver, f"{choice}-all",
                                      replace(resolution, request=request))
            else:
                await self._audit(tx, batch, resolver, f"{choice}-all", resolution)
        return resolution

    async def _resolve_batch_in(self, tx: Transaction, batch: str, resolver: str,
                                choice: str) -> Resolution:
        now = self.clock()
        rows = await tx.fetchall("SELECT * FROM approvals WHERE batch = ? ORDER BY batch_position",
                                 (batch,))
        members = [from_row(row) for row in rows]
        if not members:
            return Resolution(False, UNKNOWN_REQUEST)
        first = members[0]
        if not self.may_answer(first, resolver):
            return Resolution(False, Phrase("Only {who} or an approver can answer this request.",
                                            who=first.sender), first.status, first)
        pending = [m for m in members if m.status == "pending"]
        if self._not_theirs(resolver, choice, pending):
            return Resolution(False, Phrase(_THEIRS, sender=first.sender), first.status, first)
        if not pending:
            return Resolution(False, Phrase("Every call of this request was already answered."),
                              first.status, first)
        lapsed = next((m for m in pending if m.expires_at <= now), None)
        if lapsed is not None:
            return await self._lapse(tx, lapsed, now)
        if not all(m.args_intact for m in pending):
            return Resolution(False, ALTERED, "pending", pending[0])
        status: Status = "denied" if choice == "deny" else "approved"
        rows = await tx.fetchall(
            "UPDATE approvals SET status = ?, resolved_by = ?, resolved_at = ?"
            " WHERE batch = ? AND status = 'pending' AND expires_at > ? RETURNING *",
            (status, resolver, now, batch, now))
        decided = tuple(sorted((from_row(row) for row in rows), key=lambda r: r.position))
        if not decided:
            return Resolution(False, ANSWERED, None, first)
        said = (plural_phrase("Approved ({n} call) by {who}.", "Approved ({n} calls) by {who}.",
                              len(decided), who=resolver) if choice == "approve" else
                plural_phrase("Denied ({n} call) by {who}.", "Denied ({n} calls) by {who}.",
                              len(decided), who=resolver))
        return Resolution(True, said, status, decided[0], batch_done=True, decided=decided)

    @staticmethod
    async def _audit(tx: Transaction, approval_id: str, resolver: str, choice: str,
                     resolution: Resolution) -> None:
        await write_audit(tx, answer_audit(approval_id, resolver, choice, resolution))

    async def _audit_refusal(self, approval_id: Any, resolver: str, choice: Any,
                             resolution: Resolution) -> None:
        async with self.store.transaction() as tx:
            await self._audit(tx, str(approval_id), resolver, str(choice), resolution)

    async def claim_run(self, tx: Transaction, approval_id: str) -> bool:
        """approved -> started, in the transaction that records the call as started: True for
        exactly one caller, so an approved call starts at most once."""
        return await tx.execute("UPDATE approvals SET status = 'started' WHERE id = ?"
                                " AND status = 'approved'", (approval_id,)) == 1

    async def mark_finished(self, approval_id: str, ok: bool | None) -> None:
        """approved | started -> executed | failed (`ok` None: in_doubt), once the call has run
        (or a restart found it started with no outcome).

        Only an approved or started request moves; for any other status (a denied request the
        runtime closes the same way, one already finished) this changes nothing.
        """
        async with self.store.transaction() as tx:
            await self.finish_in(tx, approval_id, ok)

    async def finish_in(self, tx: Transaction, approval_id: str, ok: bool | None) -> None:
        """`mark_finished` inside the caller's transaction (with the call's result)."""
        status = "in_doubt" if ok is None else "executed" if ok else "failed"
        changed = await tx.execute(
            "UPDATE approvals SET status = ? WHERE id = ? AND status IN ('approved', 'started')",
            (status, approval_id))
        if changed != 1:
            log.debug("approval %s was not approved or started when marked finished", approval_id)

    async def tapped_in(self, reader: Store | Transaction, tool_use_ids: Collection[str]) -> bool:
        """Did a tap win one of these calls' requests (approved or denied, whether its call has
        run, runs or waits to, on any process)? In a transaction after `supersede_session`,
        what that did not end had already been answered."""
        if not tool_use_ids:
            return False
        marks = ", ".join("?" * len(tool_use_ids))
        row = await reader.fetchone(
            f"SELECT 1 AS found FROM approvals WHERE tool_use_id IN ({marks})"
            " AND status NOT IN ('pending', 'expired') LIMIT 1", tuple(tool_use_ids))
        return row is not None

    async def approved_unfinished(self, session_id: str) -> list[ApprovalRequest]:
        """Requests of a session answered "approve" whose call has no recorded end."""
        return await self.in_session(session_id, ("approved", "started"))

    async def in_session(self, session_id: str, statuses: tuple[str, ...]) -> list[ApprovalRequest]:
        """A session's requests in one of `statuses`, oldest first."""
        rows = await self.store.fetchall(
            f"SELECT * FROM approvals WHERE session_id = ? AND status IN"
            f" ({', '.join('?' * len(statuses))}) ORDER BY created_at", (session_id, *statuses))
        return [from_row(row) for row in rows]

    # --- queries -----------------------------------------------------------------------------

    async def expire_lapsed(self) -> list[ApprovalRequest]:
        """Close every pending request past its expiry. The UPDATE is the compare-and-set: a
        request is returned to exactly one caller, however many processes sweep."""
        now = self.clock()
        async with self.store.transaction() as tx:
            batches = await tx.fetchall(
                "SELECT DISTINCT batch FROM approvals WHERE status = 'pending' AND expires_at <= ?"
                " AND batch IS NOT NULL", (now,))
            rows = await tx.fetchall(
                "UPDATE approvals SET status = 'expired', resolved_at = ? WHERE status = 'pending'"
                " AND expires_at <= ? AND batch IS NULL RETURNING *", (now, now))
            closed = await _close_batches(tx, [row["batch"] for row in batches], now)
            lapsed = sorted([*(from_row(row) for row in rows), *closed],
                            key=lambda r: (r.created_at, r.position))
            for request in lapsed:
                await write_audit(tx, AuditEntry(
                    sender=request.sender, decision="approval:expire", outcome="expired",
                    session_id=request.session_id, tool=request.tool,
                    args_hash=request.args_hash, detail=f"{request.id!r}: not answered in time"))
        return lapsed

    async def pending_for_session(self, session_id: str) -> list[ApprovalRequest]:
        rows = await self.store.fetchall(
            "SELECT * FROM approvals WHERE session_id = ? AND status = 'pending' AND expires_at > ?"
            " ORDER BY created_at", (session_id, self.clock()))
        return [from_row(row) for row in rows]

    async def supersede_session(self, tx: Transaction, session_id: str) -> list[ApprovalRequest]:
        """The user wrote again instead of answering: every pending request of the session ends
        (in the caller's transaction: the runtime stores the new message in the same one)."""
        # An approved request whose batch still waits never ran: it ends with its batch.
        rows = await tx.fetchall(
            "UPDATE approvals SET status = 'expired', resolved_by = ?, resolved_at = ?"
            " WHERE session_id = ? AND (status = 'pending' OR (status = 'approved' AND batch IN"
            " (SELECT batch FROM approvals WHERE session_id = ? AND status = 'pending'"
            " AND batch IS NOT NULL))) RETURNING *",
            (SUPERSEDED, self.clock(), session_id, session_id))
        return sorted((from_row(row) for row in rows), key=lambda r: (r.created_at, r.position))

    async def pending(self, channel: str | None = None) -> list[ApprovalRequest]:
        sql = "SELECT * FROM approvals WHERE status = 'pending' AND expires_at > ?"
        params: tuple[Any, ...] = (self.clock(),)
        if channel is not None:
            sql += " AND channel = ?"
            params += (channel,)
        rows = await self.store.fetchall(sql + " ORDER BY created_at", params)
        return [from_row(row) for row in rows]

    async def recently_resolved(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` requests that are no longer pending, newest first."""
        rows = await self.store.fetchall(
            "SELECT id, tool, sender, status, resolved_by, resolved_at, created_at FROM approvals"
            " WHERE status <> 'pending' ORDER BY created_at DESC LIMIT ?", (limit,))
        return [dict(row) for row in rows]

    async def set_message_ref(self, approval_id: str, ref: str, channel: str = "") -> None:
        """Remember a message showing the request (the requester's, or an approver's copy), so
        every copy can show the outcome. The first one is the requester's."""
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE approvals SET message_ref = ? WHERE id = ?"
                             " AND message_ref IS NULL", (ref, approval_id))
            await tx.execute("INSERT INTO approval_messages(approval_id, channel, ref)"
                             " VALUES (?, ?, ?) ON CONFLICT DO NOTHING", (approval_id, channel, ref))

    async def message_refs(self, approval_id: str) -> list[tuple[str, str]]:
        """(channel, ref) of every message that shows the request."""
        rows = await self.store.fetchall(
            "SELECT channel, ref FROM approval_messages WHERE approval_id = ?",
            (approval_id,))
        return [(row["channel"], row["ref"]) for row in rows]

    async def message_ref(self, approval_id: str) -> str | None:
        if not looks_like_id(approval_id):
            return None
        row = await self.store.fetchone("SELECT message_ref FROM approvals WHERE id = ?",
                                        (approval_id,))
        return row["message_ref"] if row else None



async def _close_batches(tx: Transaction, batches: list[str], now: float) -> list[ApprovalRequest]:
    """Close lapsed batches whole: their pending requests, and their approved ones (which never
    ran: a batch runs only once every request is decided)."""
    closed: list[ApprovalRequest] = []
    for batch in batches:
        rows = await tx.fetchall(
            "UPDATE approvals SET status = 'expired', resolved_at = ? WHERE batch = ?"
            " AND status IN ('pending', 'approved') RETURNING *", (now, batch))
        closed.extend(sorted((from_row(row) for row in rows), key=lambda r: r.position))
    return closed
