"""The approval question at the terminal: how it reads, and what an answer means.

One request: y / n (or Enter) / a(lways) when Always is offered. Several calls of one model
step in one question: a (approve all), d (deny all, or Enter) or a letter per call in order.
"""

from __future__ import annotations

from bot.core.events import ApprovalView
from channels.cli import texts

CHOICES = {"y": "approve", "yes": "approve", "a": "always", "always": "always",
           "n": "deny", "no": "deny", "": "deny"}
BATCH_CHOICES = {"a": "approve", "all": "approve", "d": "deny", "": "deny"}


def heading(views: tuple[ApprovalView, ...]) -> str:
    """What is asked, shown above the question: the call (or every call) with its preview."""
    if len(views) == 1:
        view = views[0]
        return texts.APPROVAL_ONE.format(tool=view.tool, risk=view.risk, summary=view.summary)
    lines = [texts.APPROVAL_BATCH.format(count=len(views))]
    for number, view in enumerate(views, start=1):
        always = texts.APPROVAL_BATCH_ALWAYS.format(scope=view.always) if view.always else ""
        lines.append(texts.APPROVAL_BATCH_CALL.format(number=number, tool=view.tool, risk=view.risk,
                                                      always=always, summary=view.summary))
    return "\n".join(lines)


def question(views: tuple[ApprovalView, ...]) -> str:
    if len(views) > 1:
        return texts.APPROVAL_BATCH_QUESTION
    always = texts.APPROVAL_ALWAYS.format(scope=views[0].always) if views[0].always else ""
    return texts.APPROVAL_QUESTION.format(always=always)


def batch_prompt(views: tuple[ApprovalView, ...]) -> str:
    """Every call of the step with its whole preview, numbered, then the question."""
    return f"{heading(views)}\n{question(views)}"


def choices(views: tuple[ApprovalView, ...]) -> str:
    """The answers that would be understood, for "Please answer …"."""
    if len(views) == 1:
        return texts.CHOICES_ONE_ALWAYS if views[0].always else texts.CHOICES_ONE
    example = "yn" * (len(views) // 2) + "y" * (len(views) % 2)
    return texts.CHOICES_BATCH.format(example=example)


def ask_again(views: tuple[ApprovalView, ...], answer: str) -> str:
    return texts.ASK_AGAIN.format(choices=choices(views), answer=answer.strip()[:40])


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


def outcome_line(tools: str, choice: str, resolver: str) -> str:
    """An approval answered away from this terminal: what became of it, and who decided."""
    outcome = texts.OUTCOME.get(choice, choice)
    if choice == "expire":
        return texts.EXPIRED_ELSEWHERE.format(tools=tools, outcome=outcome)
    return texts.ANSWERED_ELSEWHERE.format(tools=tools, outcome=outcome, resolver=resolver)
