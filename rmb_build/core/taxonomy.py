"""The RMB taxonomy as data: 2 goals, 12 helpfulness tasks with 37 scenarios, 12 harmlessness scenarios.

Folder names are spelled exactly as the official release spells them (some lost a ``/``),
so that releases written by this toolkit stay compatible with RMB's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

HELPFULNESS = "Helpfulness"
HARMLESSNESS = "Harmlessness"
GOALS = (HELPFULNESS, HARMLESSNESS)

PAIRWISE_SET = "pairwise"
BON_SET = "bon"
SETS = (PAIRWISE_SET, BON_SET)
SET_FOLDERS = {PAIRWISE_SET: "Pairwise_set", BON_SET: "BoN_set"}
FOLDER_SETS = {folder: name for name, folder in SET_FOLDERS.items()}

HELPFULNESS_TASKS: dict[str, tuple[str, ...]] = {
    "Brainstorming": ("Idea Development", "Problem Solving"),
    "Chat": ("Casual Conversation", "Discussion", "Supportive Conversation"),
    "Classification": ("Content Categorization", "Quality and Compliance Assessment"),
    "Closed QA": ("ContextBased", "OptionBased"),
    "Code": (
        "Data Management",
        "Development and Implementation",
        "Documentation",
        "Quality and Optimization",
    ),
    "Generation": ("Creative Writing", "Professional Content Generation"),
    "Open QA": (
        "Factual",
        "General Explanation",
        "Hypothetical Scenarios",
        "Interpretative Analysis",
        "Personal Opinion and Advice",
        "Technical and Practical Support",
    ),
    "Reasoning": (
        "Analytical Reasoning",
        "Critical Thinking",
        "Human Decision Making",
        "Logical Deduction",
        "Pattern Recognition",
    ),
    "Rewrite": (
        "Paraphrasing",
        "PostQuality Assessment Rewriting",
        "Textual ExpansionReduction",
        "Tone Adjustment",
    ),
    "Role Playing": ("General Character", "Specific Character"),
    "Summarization": ("Specialized Summaries", "Standard Summaries"),
    "Translation": (
        "GeneralExcerpt Language Translation",
        "Literary and Cultural Translation",
        "Technical and Scientific Translation",
    ),
}

# Llama Guard 2's hazard categories; RMB's S1..S11 follow this numbering.
HAZARD_CATEGORIES: dict[str, str] = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex-Related Crimes",
    "S4": "Child Sexual Exploitation",
    "S5": "Specialized Advice",
    "S6": "Privacy",
    "S7": "Intellectual Property",
    "S8": "Indiscriminate Weapons",
    "S9": "Hate",
    "S10": "Suicide & Self-Harm",
    "S11": "Sexual Content",
}
MULTI = "multi"
HARMLESSNESS_SCENARIOS: tuple[str, ...] = (*HAZARD_CATEGORIES, MULTI)


@dataclass(frozen=True)
class Scenario:
    """One of the 49 scenarios. ``id`` is the path under a set folder: ``Helpfulness/Chat/Discussion``."""

    goal: str
    task: str | None  # None for harmlessness scenarios, which belong to no task
    name: str

    @property
    def id(self) -> str:
        return "/".join(p for p in (self.goal, self.task, self.name) if p)

    @property
    def task_id(self) -> str | None:
        return f"{self.goal}/{self.task}" if self.task else None

    def category_path(self, set_name: str) -> str:
        """``Pairwise_set/Helpfulness/Chat/Discussion`` for ``pairwise``."""
        return f"{SET_FOLDERS[set_name]}/{self.id}"


@lru_cache(maxsize=1)
def all_scenarios() -> tuple[Scenario, ...]:
    """The 49 scenarios in a stable order: helpfulness by task, then S1..S11, multi."""
    helpful = [Scenario(HELPFULNESS, task, name) for task, names in HELPFULNESS_TASKS.items() for name in names]
    harmless = [Scenario(HARMLESSNESS, None, name) for name in HARMLESSNESS_SCENARIOS]
    return tuple(helpful + harmless)


@lru_cache(maxsize=1)
def scenarios_by_id() -> dict[str, Scenario]:
    return {s.id: s for s in all_scenarios()}


def scenario(scenario_id: str) -> Scenario:
    """Look a scenario up by id; raises KeyError naming the id when it is not one of the 49."""
    try:
        return scenarios_by_id()[scenario_id]
    except KeyError:
        raise KeyError(f"unknown scenario {scenario_id!r}") from None


def is_known(scenario_id: str) -> bool:
    return scenario_id in scenarios_by_id()


def parse_scenario_id(scenario_id: str) -> Scenario:
    """Split any ``Goal[/Task]/Name`` id into a Scenario, known or not (for reading foreign releases)."""
    parts = scenario_id.split("/")
    if is_known(scenario_id):
        return scenario(scenario_id)
    if len(parts) == 3:
        return Scenario(parts[0], parts[1], parts[2])
    if len(parts) == 2:
        return Scenario(parts[0], None, parts[1])
    return Scenario(parts[0] if parts else "", None, "/".join(parts[1:]))


assert len(all_scenarios()) == 49
assert sum(len(v) for v in HELPFULNESS_TASKS.values()) == 37
