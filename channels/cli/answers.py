"""The approval question at the terminal: how it reads, and what an answer means.

One request: y / n (or Enter) / a(lways) when Always is offered. Several calls of one model
step in one question: a (approve all), d (deny all, or Enter) or a letter per call in order.
"""

from __future__ import annotations

from bot.core.approval_cards import RISK_NAMES, ApprovalView
from bot.language.translator import Translator
from channels.cli import texts

CHOICES = {"y": "approve", "yes": "approve", "a": "always", "always": "always",
           "n": "deny", "no": "deny", "": "deny"}
BATCH_CHOICES = {"a": "approve", "all": "approve", "d": "deny", "": "deny"}


def _risk(view: ApprovalView, tr: Translator) -> str:
    name = RISK_NAMES.get(view.risk)
    return tr._(name) if name else view.risk


def heading(views: tuple[ApprovalView, ...], tr: Translator) -> str:
    """What is asked, shown above the question: the call (or every call) with its preview
    (exactly as the tool wrote it; every other word in the terminal's language)."""
    if len(views) == 1:
        view = views[0]
        return tr._(texts.APPROVAL_ONE, tool=view.tool, risk=_risk(view, tr),
                    summary=tr.say(view.summary))
    lines = ["\n" + tr.ngettext("Approval needed — {n} call:", "Approval needed — {n} calls:",
                                len(views))]
    for number, view in enumerate(views, start=1):
        always = tr._(texts.APPROVAL_BATCH_ALWAYS, scope=tr.say(view.always)) if view.always else ""
        lines.append(tr._(texts.APPROVAL_BATCH_CALL, number=number, tool=view.tool,
                          risk=_risk(view, tr), always=always, summary=tr.say(view.summary)))
    return "\n".join(lines)


def question(views: tuple[ApprovalView, ...], tr: Translator) -> str:
    if len(views) > 1:
        return tr._(texts.APPROVAL_BATCH_QUESTION)
    always = tr._(texts.APPROVAL_ALWAYS, scope=tr.say(views[0].always)) if views[0].always else ""
    return tr._(texts.APPROVAL_QUESTION, always=always)


def batch_prompt(views: tuple[ApprovalView, ...], tr: Translator) -> str:
    """Every call of the step with its whole preview, numbered, then the question."""
    return f"{heading(views, tr)}\n{question(views, tr)}"


def choices(views: tuple[ApprovalView, ...], tr: Translator) -> str:
    """The answers that would be understood, for "Please answer …"."""
    if len(views) == 1:
        return tr._(texts.CHOICES_ONE_ALWAYS if views[0].always else texts.CHOICES_ONE)
    example = "yn" * (len(views) // 2) + "y" * (len(views) % 2)
    return tr._(texts.CHOICES_BATCH, example=example)


def ask_again(views: tuple[ApprovalView, ...], answer: str, tr: Translator) -> str:
    return tr._(texts.ASK_AGAIN, choices=choices(views, tr), answer=answer.strip()[:40])


def parse_answer(text: str, views: tuple[ApprovalView, ...]) -> str | list[str] | None:
    """One request: approve, deny or always. Several: approve or deny (all of them), or one
    choice per call in order ("yna"). None when the answer is none of these."""
    answer = text.strip().lower()
    if len(views) == 1:
        choice = CHOICES.get(answer)
        return choice if choice is not None and (choice != "always" or views[0].always) else None
    if answer in BATCH_CHOICES:
        return BATCH_CHOICES[answer]
    letters = answer.replace(" ", "")
    if len(letters) != len(views) or any(c not in "yna" for c in letters):
        return None
    picked = [CHOICES[c] for c in letters]
    if any(choice == "always" and not view.always for choice, view in zip(picked, views, strict=True)):
        return None
    return picked


def outcome_line(tools: str, choice: str, resolver: str, tr: Translator) -> str:
    """An approval answered away from this terminal: what became of it, and who decided."""
    outcome = tr._(texts.OUTCOME[choice]) if choice in texts.OUTCOME else choice
    if choice == "expire":
        return tr._(texts.EXPIRED_ELSEWHERE, tools=tools, outcome=outcome)
    return tr._(texts.ANSWERED_ELSEWHERE, tools=tools, outcome=outcome, resolver=resolver)
