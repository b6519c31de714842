"""Human-in-the-loop: what a gate asks, and how an answer is checked and normalised.

One vocabulary for every transport: REST ``resumeValue``, the signed-token URLs, the CLI
and A2A reply messages all end up in ``normalize_approval`` (a gate's decision) or
``normalize_answers`` (a clarification's answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, get_args

from tether.errors import InvalidInput

#: the five resume actions of an approval gate (``ApprovalData.actions``)
ApprovalAction = Literal["accept", "reject", "refine", "edit-accept", "ask"]
#: what an ``approval.received`` records: a decision that ended the wait (``ask`` does not)
ApprovalOutcome = Literal["accept", "reject", "refine", "edit-accept", "timeout"]

APPROVAL_ACTIONS: Final[tuple[ApprovalAction, ...]] = get_args(ApprovalAction)
DEFAULT_GATE_ACTIONS = ("accept", "reject")
REFINE_SCOPES = ("whole", "section", "items")


def gate_actions(config: dict[str, Any]) -> list[str]:
    """The resume actions a gate allows (config spells edit-accept as ``edit`` too)."""
    configured = config.get("actions") or list(DEFAULT_GATE_ACTIONS)
    actions: list[str] = []
    for action in configured:
        name = "edit-accept" if action == "edit" else action
        if name in APPROVAL_ACTIONS and name not in actions:
            actions.append(name)
    return actions or list(DEFAULT_GATE_ACTIONS)


def legacy_actions(actions: list[str]) -> list[str]:
    """The ``approval.requested`` spelling of the same actions (``edit``)."""
    return ["edit" if a == "edit-accept" else a for a in actions]


class ApprovalFields(TypedDict, total=False):
    """The optional fields of an approval decision, beside its action.

    ``normalize_approval`` sets the caller's (which ones depends on the action); the
    engine adds who decided and when, or the reason of a timeout. One TypedDict holds
    both so that the recorded decision (``events.ApprovalResume``) can be built by
    unpacking it: mypy accepts ``**`` into a TypedDict only from one declaring every
    optional key of the target.
    """

    feedback: str
    comment: str
    refineFeedback: dict[str, Any]
    editedArtifactData: Any
    question: str
    decidedBy: str
    decidedAt: str
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    action: ApprovalAction
    fields: ApprovalFields


def normalize_approval(value: Any, allowed: list[str]) -> ApprovalDecision:
    """Check an approval resume value against the five-action vocabulary and the gate."""
    if not isinstance(value, dict):
        raise InvalidInput("resumeValue for an approval must be an object with an 'action'")
    value = dict(value)
    if "action" not in value:
        if isinstance(value.get("approve"), bool):
            value["action"] = "accept" if value.pop("approve") else "reject"
        elif value.get("decision") in ("approved", "rejected"):
            decision = value.pop("decision")
            feedback = value.get("feedback")
            if decision == "approved":
                value["action"] = "accept"
            elif isinstance(feedback, str) and feedback:
                value["action"] = "refine"
                value["refineFeedback"] = {"scope": "whole", "text": feedback}
            else:
                value["action"] = "reject"
    action = value.get("action")
    if action == "edit":
        action = "edit-accept"
    if action not in APPROVAL_ACTIONS:
        raise InvalidInput(
            f"unknown approval action {action!r}; use one of {', '.join(APPROVAL_ACTIONS)}",
            details={"allowedActions": allowed},
        )
    if action not in allowed:
        raise InvalidInput(
            f"this gate does not allow {action!r}; it allows {', '.join(allowed)}",
            details={"allowedActions": allowed},
        )
    fields: ApprovalFields = {}
    if "feedback" in value:
        fields["feedback"] = _string(value, "feedback")
    if "comment" in value:
        fields["comment"] = _string(value, "comment")
    if action == "refine":
        refine = value.get("refineFeedback")
        if refine is None and isinstance(value.get("feedback"), str):
            refine = {"scope": "whole", "text": value["feedback"]}
        if not isinstance(refine, dict) or refine.get("scope") not in REFINE_SCOPES:
            raise InvalidInput(
                "action 'refine' needs refineFeedback with scope whole, section or items",
                details={"field": "refineFeedback"},
            )
        fields["refineFeedback"] = refine
    if action == "edit-accept":
        if "editedArtifactData" not in value:
            raise InvalidInput("action 'edit-accept' needs editedArtifactData", details={"field": "editedArtifactData"})
        fields["editedArtifactData"] = value["editedArtifactData"]
    if action == "ask":
        question = value.get("question", value.get("text", value.get("feedback")))
        if not isinstance(question, str) or not question.strip():
            raise InvalidInput("action 'ask' needs a question (text)", details={"field": "question"})
        fields["question"] = question
    return ApprovalDecision(action, fields)


def _string(value: dict[str, Any], name: str) -> str:
    text = value[name]
    if not isinstance(text, str):
        raise InvalidInput(f"'{name}' must be a string")
    return text


def normalize_answers(value: Any, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Clarification answers as a map, from ``{answers: {id: v}}`` or ``{answers: [{id, answer}]}``."""
    if not isinstance(value, dict) or "answers" not in value:
        raise InvalidInput("resumeValue for a clarification must be an object with 'answers'")
    raw = value["answers"]
    answers: dict[str, Any] = {}
    if isinstance(raw, dict):
        answers = dict(raw)
    elif isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "answer" not in item:
                raise InvalidInput("each answer in the list must be an object {id, answer}")
            answers[item["id"]] = item["answer"]
    else:
        raise InvalidInput("'answers' must be an object or a list of {id, answer}")
    known = [q["id"] for q in questions]
    unknown = [k for k in answers if k not in known]
    if unknown:
        raise InvalidInput(
            f"no question with id {unknown[0]!r}; questions are {', '.join(known)}", details={"questions": known}
        )
    missing = [k for k in known if k not in answers]
    if missing:
        raise InvalidInput(f"question {missing[0]!r} is not answered", details={"missing": missing})
    return answers
