"""smolagents (Hugging Face) memory steps, as `agent.memory.get_full_steps()` / `step.dict()`
write them: an ActionStep `{step_number, tool_calls: [{id, type, function: {name,
arguments}}], observations, action_output, error: {type, message} | null, is_final_answer}`;
TaskStep `{task}`, PlanningStep `{plan}`, SystemPromptStep `{system_prompt}` carry no tool event.

An action step holds its calls and what came of them: `observations` (the tool's output, or the
code's execution log) is the result of each call of the step (by the call's id), `action_output`
when there is no observation (the `final_answer` tool), and `error` makes it a failed result.
The compiled core hands these records to Python (their `tool_calls` look like Chat Completions').
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import openai
from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import CALL, REQUEST_PART, RESULT, Part

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "smolagents",
    "`step_number` with `tool_calls` / `observations` (smolagents memory steps, `step.dict()`)",
    {
        "step_number": 3,
        "timing": {"start_time": 1747740006.1, "end_time": None, "duration": None},
        "model_input_messages": None,
        "tool_calls": [
            {
                "id": "call_w3bS2",
                "type": "function",
                "function": {"name": "web_search", "arguments": {"query": "Leonardo of Pisa Liber Abaci"}},
            }
        ],
        "error": None,
        "model_output": None,
        "observations": None,
        "action_output": None,
        "token_usage": None,
        "is_final_answer": False,
    },
)

FORMAT: Final = "smolagents"


def claims(d: dict[str, Any]) -> bool:
    """A step without tool calls (a task, a plan, a system prompt; an action step whose model
    output did not parse)."""
    return "step_number" in d or ("task" in d and "task_images" in d) or ("plan" in d and "timing" in d)


def parse(d: dict[str, Any]) -> list[Part]:
    if "task" in d and "step_number" not in d:
        return [REQUEST_PART]
    calls = d.get("tool_calls")
    if type(calls) is not list or not calls:
        return []
    found = openai.chat_calls(calls, "")
    out: list[Part] = [(CALL, p[1], p[2], p[3], None, p[5], FORMAT) for p in found]
    error = d.get("error")
    observations = d.get("observations")
    payload = observations if observations is not None else d.get("action_output")
    if error is not None:
        payload = error if observations is None else observations
    if payload is None and error is None:
        return out  # the step ended before its tools ran: the calls stay unanswered
    out += [(RESULT, p[1], p[2], payload, error is not None, d, FORMAT) for p in found]
    return out
