"""examples/agent_loop.py: every tool call is answered by a message with its id, and the loop goes on after an error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from ..conftest import ROOT, demo_argv

EXAMPLE = ROOT / "examples" / "agent_loop.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(transcript: list[dict[str, Any]]) -> None:
    assert [m["role"] for m in transcript[:2]] == ["system", "user"]
    turns = []  # (the assistant's tool calls, the tool messages that follow it)
    for i, message in enumerate(transcript):
        if message["role"] == "assistant" and message.get("tool_calls"):
            answers = []
            for later in transcript[i + 1:]:
                if later["role"] != "tool":
                    break
                answers.append(later)
            turns.append((message["tool_calls"], answers))
    assert [len(calls) for calls, _ in turns] == [1, 2, 1, 1]  # the second turn asked for two tools at once
    contents = {}
    for calls, answers in turns:
        assert [a["tool_call_id"] for a in answers] == [c["id"] for c in calls]  # one answer per call, in order
        for answer in answers:
            assert set(answer) == {"role", "tool_call_id", "content"} and isinstance(answer["content"], str)
            contents[answer["tool_call_id"]] = answer["content"]
    assert '"city":"Paris"' in contents["call_1"] and '"conditions"' in contents["call_1"]
    assert contents["call_2a"] == "42"
    assert contents["call_2b"] == "hi"
    assert contents["call_3"].startswith("Error: invalid arguments for tool 'mcp__demo__add'")
    assert "not valid JSON" in contents["call_3"]
    assert contents["call_4"] == "3"  # the loop went on after the error: the model retried
    final = transcript[-1]
    assert final["role"] == "assistant" and not final.get("tool_calls")
    assert "19 + 23 = 42" in final["content"] and "'hi'" in final["content"]


def test_main_returns_the_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    transcript = _example().main(demo_argv())
    _check(transcript)
    printed = capsys.readouterr().out
    assert "assistant -> mcp__demo__add({\"a\": 1, \"b\": ) [call_3]" in printed
    assert "tool [call_2b]: hi" in printed


def test_runs_as_a_script() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60,
                          cwd=str(ROOT), check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "system: Use the tools to answer."
    assert "  tool [call_2a]: 42" in lines and "  tool [call_4]: 3" in lines
    assert any(line.startswith("  tool [call_3]: Error: invalid arguments") for line in lines)
    assert lines[-1].startswith("assistant: In Paris it is ")
    assert not done.stderr


def test_a_model_that_never_answers_is_stopped() -> None:
    example = _example()
    import mcpcall

    def stubborn(messages: Any, tools: Any) -> dict[str, Any]:
        name = tools[0]["function"]["name"]
        return {"role": "assistant", "content": None, "tool_calls": [example.call(f"c{len(messages)}", name, {})]}

    with mcpcall.ToolRegistry({"demo": demo_argv()}) as registry, pytest.raises(RuntimeError, match="no answer after 2 turns"):
        example.run(registry, stubborn, "loop forever", max_turns=2)
