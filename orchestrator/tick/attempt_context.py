"""One attempt's values, in one place: the `{placeholders}` of its commands,
the ORCHESTRATOR_* variables of its environment and the fields of its prompt
all come from an `AttemptContext`, so they can never disagree."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.domain.text import clean_text
from orchestrator.ext.model import Claim

if TYPE_CHECKING:
    from orchestrator.agents.context_file import ContextFile

_PROMPT_FIELD = re.compile(
    r"\{(task|title|body|stage|attempt|workspace|hint|prev_outcome|prev_score"
    r"|reasons|history|context_file|prev_session|feedback)\}"
)


@dataclass(frozen=True)
class AttemptContext:
    """Everything an attempt is told about itself, frozen once it is known
    (the prompt file is added when the prompt is written)."""

    task: str
    title: str
    body: str
    stage: str
    attempt: int
    workspace: Path
    hint: str
    prev_outcome: str
    prev_score: str
    prompt_file: Path | None = None
    config_dir: str = ""  # the folder of the config file: recipes find their prompts there
    # From the context file (`context_file.ContextFile`), once it is written:
    context_file: Path | None = None
    reasons: str = ""  # the last verdict's reasons, as a list
    history: str = ""  # a compact table of the run's attempts
    prev_session: str = ""  # the previous attempt's agent session, to resume it
    candidate: int = 1  # best of N: this candidate's slot, 1..candidates
    # What came back from outside (a pull request's review) for this attempt,
    # as text and as a JSON file (`attempt_feedback`); none for most.
    feedback: str = ""
    feedback_file: Path | None = None
    # The features' ORCHESTRATOR_* variables (`TickHooks.attempt_env`): each
    # is a prompt field too, named by its lowercased tail (`{notes}`).
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, claim: Claim, workspace: Path, config_dir: Path | None = None) -> AttemptContext:
        return cls(
            task=claim.task.slug,
            title=claim.task.title,
            body=claim.task.body,
            stage=claim.stage.name,
            attempt=claim.number,
            workspace=workspace,
            hint=claim.hint,
            prev_outcome=claim.prev_outcome,
            prev_score=claim.prev_score,
            config_dir="" if config_dir is None else str(config_dir),
            candidate=claim.candidate or 1,
        )

    def with_extra(self, variables: dict[str, str]) -> AttemptContext:
        return dataclasses.replace(self, extra=tuple(sorted(variables.items())))

    def with_prompt(self, prompt_file: Path | None) -> AttemptContext:
        return dataclasses.replace(self, prompt_file=prompt_file)

    def with_brief(self, brief: ContextFile, path: Path | None) -> AttemptContext:
        """Add what the context file tells (`path` None: the disk refused it)."""
        return dataclasses.replace(
            self,
            context_file=path,
            reasons=brief.reasons,
            history=brief.history,
            prev_session=brief.prev_session,
        )

    def with_feedback(self, found: tuple[str, Path] | None) -> AttemptContext:
        if found is None:
            return self
        return dataclasses.replace(self, feedback=found[0], feedback_file=found[1])

    def for_setup(self) -> AttemptContext:
        """Setup makes the workspace for every stage to come: it is given no
        hint and no prompt, which belong to one attempt's work."""
        return dataclasses.replace(self, hint="", prompt_file=None)

    def placeholders(self) -> dict[str, str]:
        """The values of a command's `{placeholders}` (`runner.PLACEHOLDERS`)."""
        return {
            "task": self.task,
            "stage": self.stage,
            "attempt": str(self.attempt),
            "workspace": str(self.workspace),
            "prompt_file": "" if self.prompt_file is None else str(self.prompt_file),
            "hint": self.hint,
            "config_dir": self.config_dir,
            "context_file": "" if self.context_file is None else str(self.context_file),
            "prev_session": self.prev_session,
            "candidate": str(self.candidate),
            "feedback": self.feedback,
        }

    def environment(self) -> dict[str, str]:
        """The ORCHESTRATOR_* variables a worker or verifier sees: the
        features' first, so the engine's own win a name both set."""
        return {
            **dict(self.extra),
            "ORCHESTRATOR_TASK": self.task,
            "ORCHESTRATOR_STAGE": self.stage,
            "ORCHESTRATOR_ATTEMPT": str(self.attempt),
            "ORCHESTRATOR_WORKSPACE": str(self.workspace),
            "ORCHESTRATOR_NEXT_HINT": self.hint,
            "ORCHESTRATOR_PREV_SCORE": self.prev_score,
            "ORCHESTRATOR_PREV_OUTCOME": self.prev_outcome,
            "ORCHESTRATOR_PROMPT_FILE": self.placeholders()["prompt_file"],
            "ORCHESTRATOR_CONTEXT_FILE": self.placeholders()["context_file"],
            "ORCHESTRATOR_CANDIDATE": str(self.candidate),
            "ORCHESTRATOR_FEEDBACK": "" if self.feedback_file is None else str(self.feedback_file),
        }

    def setup_environment(self) -> dict[str, str]:
        """The fewer variables setup sees: which task, and where."""
        return {"ORCHESTRATOR_TASK": self.task, "ORCHESTRATOR_WORKSPACE": str(self.workspace)}

    def prompt_fields(self) -> dict[str, str]:
        return {
            "task": self.task,
            "title": self.title,
            "body": self.body,
            "stage": self.stage,
            "attempt": str(self.attempt),
            "workspace": str(self.workspace),
            "hint": self.hint,
            "prev_outcome": self.prev_outcome,
            "prev_score": self.prev_score,
            "reasons": self.reasons,
            "history": self.history,
            "context_file": self.placeholders()["context_file"],
            "prev_session": self.prev_session,
            "feedback": self.feedback,
        }

    def render_prompt(self, template: str) -> str:
        """The template with its `{fields}` filled, each value cleaned; a
        feature's variable is a field only when the feature set it (else
        `{notes}` stays as written, as any unknown brace does)."""
        fields = self.prompt_fields()
        pattern = _PROMPT_FIELD
        if self.extra:
            ours = {name.removeprefix("ORCHESTRATOR_").lower(): v for name, v in self.extra}
            fields = {**ours, **fields}
            names = "|".join(sorted(re.escape(name) for name in fields))
            pattern = re.compile(r"\{(" + names + r")\}")
        return pattern.sub(lambda m: clean_text(fields[m.group(1)]), template)
