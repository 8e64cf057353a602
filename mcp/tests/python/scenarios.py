"""lf-handoff's MCP server driven by the protocol's official Python SDK.

Run by `cli/tests/cli/mcp.rs` (which starts what it needs and passes it
here), once per transport:

    python scenarios.py stdio LF_HANDOFF STORE WAIT_SECONDS
    python scenarios.py http LF_HANDOFF STORE WAIT_SECONDS URL AGENT_TOKEN

LF_HANDOFF is the `lf-handoff` binary, STORE the store URL the command
line answers through (a person's), WAIT_SECONDS the server's bound on a
tool's wait. Over stdio each client starts `lf-handoff mcp --wait ...`
on STORE itself; over http it reaches `serve`'s `/mcp` at URL with the
agent's token. Each scenario prints its name; any failure raises, and the
exit status is not 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

TOOLS = {"ask_person", "await_answer", "get_handoff", "list_waiting"}


class Setup:
    def __init__(self, argv: list[str]) -> None:
        self.transport = argv[1]
        self.binary = argv[2]
        self.store = argv[3]
        self.wait = float(argv[4])
        self.url = argv[5] if self.transport == "http" else None
        self.token = argv[6] if self.transport == "http" else None

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        """A client of a fresh connection (over stdio: a fresh server)."""
        if self.transport == "stdio":
            server: Any = StdioServerParameters(
                command=self.binary,
                args=["--store", self.store, "mcp", "--wait", f"{int(self.wait)}s"],
                env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")},
                cwd=os.getcwd(),
            )
            async with Client(server) as client:
                yield client
        else:
            headers = {"Authorization": f"Bearer {self.token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
                async with Client(streamable_http_client(self.url, http_client=http)) as client:
                    yield client

    def cli(self, *args: str) -> str:
        """Runs the command line on the store as a person does; its stdout."""
        run = subprocess.run(
            [self.binary, "--store", self.store, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if run.returncode != 0:
            raise AssertionError(f"lf-handoff {' '.join(args)} failed: {run.stderr}")
        return run.stdout

    def waiting_with(self, question: str) -> str:
        """The id of the active handoff asking `question`, once it exists."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = json.loads(self.cli("--json", "list", "--active"))
            for row in rows:
                if row["reason"] == question:
                    return row["id"]
            time.sleep(0.05)
        raise AssertionError(f"no handoff asks {question!r}")


def facts(result: Any) -> dict[str, Any]:
    assert not result.is_error, f"a tool error: {result.content}"
    assert result.structured_content is not None, result
    text = result.content[0].text
    assert text, result
    return result.structured_content


def tool_error(result: Any, kind: str) -> str:
    assert result.is_error, f"not a tool error: {result}"
    error = result.structured_content["error"]
    assert error["kind"] == kind, error
    assert error["message"], error
    return error["message"]


async def tools_are_listed_with_schemas_and_descriptions(setup: Setup) -> None:
    async with setup.client() as client:
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == TOOLS, tools.keys()
        for tool in tools.values():
            assert len(tool.description) > 40, tool
            assert tool.input_schema["type"] == "object", tool
        ask = tools["ask_person"].input_schema
        assert ask["required"] == ["question"], ask
        for name in ["question", "choices", "form", "step", "expires_in"]:
            assert name in ask["properties"], ask
        assert tools["await_answer"].input_schema["required"] == ["id"]


async def ask_person_gets_an_answer_given_at_the_command_line(setup: Setup) -> None:
    question = f"Deploy build 17 to staging? ({setup.transport})"
    async with setup.client() as client:
        asking = asyncio.create_task(
            client.call_tool("ask_person", {"question": question, "step": "deploy-17"})
        )
        handoff = await asyncio.to_thread(setup.waiting_with, question)
        await asyncio.to_thread(setup.cli, "complete", handoff, "--summary", "yes, deploy it")
        answered = facts(await asking)
        assert answered["state"] == "answered", answered
        assert answered["status"] == "completed", answered
        assert answered["text"] == "yes, deploy it", answered
        assert answered["id"] == handoff, answered
        assert answered["created"] is True, answered
        # Asking again at the same step returns that handoff and its answer.
        again = facts(
            await client.call_tool("ask_person", {"question": question, "step": "deploy-17"})
        )
        assert again["id"] == handoff and again["created"] is False, again
        assert again["text"] == "yes, deploy it", again


async def await_answer_gets_an_answer_given_after_ask_person_returned_waiting(
    setup: Setup,
) -> None:
    question = f"Which region, eu or us? ({setup.transport})"
    async with setup.client() as client:
        started = time.monotonic()
        waiting = facts(
            await client.call_tool("ask_person", {"question": question, "expires_in": "1h"})
        )
        took = time.monotonic() - started
        assert waiting["state"] == "waiting", waiting
        assert took >= setup.wait - 0.5, f"returned after {took:.1f} s"
        handoff = waiting["id"]
        assert handoff in (await client.call_tool("list_waiting", {})).content[0].text
        read = facts(await client.call_tool("get_handoff", {"id": handoff}))
        assert read["state"] == "waiting" and read["expires_at"], read
    # The person answers while no client is connected.
    setup.cli("complete", handoff, "--summary", "eu")
    async with setup.client() as client:
        answered = facts(await client.call_tool("await_answer", {"id": handoff}))
        assert answered["state"] == "answered", answered
        assert answered["text"] == "eu", answered
        listed = await client.call_tool("list_waiting", {})
        assert listed.structured_content["waiting"] == [], listed


async def wrong_arguments_are_tool_errors_and_the_server_keeps_serving(setup: Setup) -> None:
    unknown = "ih_0192f2a4-0000-7000-8000-000000000000"
    async with setup.client() as client:
        for name, arguments, kind in [
            ("ask_person", {}, "invalid_input"),
            ("ask_person", {"question": 5}, "invalid_input"),
            ("ask_person", {"question": "q", "colour": "red"}, "invalid_input"),
            ("ask_person", {"question": "q", "expires_in": "soon"}, "invalid_input"),
            ("ask_person", {"question": "  "}, "invalid_input"),
            (
                "ask_person",
                {"question": "q", "choices": [{"value": "a", "label": "A"}], "form": {}},
                "invalid_input",
            ),
            ("ask_person", {"question": "q", "choices": [{"value": "a", "label": "A"}]}, "invalid_input"),
            (
                "ask_person",
                {"question": "q", "choices": [{"value": "a b", "label": "A"}, {"value": "c", "label": "C"}]},
                "invalid_input",
            ),
            (
                "ask_person",
                {"question": "q", "form": {"type": "object", "properties": {"x": {"type": "object"}}}},
                "invalid_input",
            ),
            ("await_answer", {}, "invalid_input"),
            ("await_answer", {"id": "nope"}, "invalid_input"),
            ("await_answer", {"id": unknown}, "not_found"),
            ("get_handoff", {"id": unknown}, "not_found"),
            ("list_waiting", {"everything": True}, "invalid_input"),
        ]:
            tool_error(await client.call_tool(name, arguments), kind)
        try:
            await client.call_tool("delete_everything", {})
            raise AssertionError("an unknown tool was called")
        except MCPError:
            pass
        # Still serving.
        listed = await client.call_tool("list_waiting", {})
        assert not listed.is_error, listed


async def a_client_gone_mid_wait_leaves_the_question_open_and_the_step_finds_it(
    setup: Setup,
) -> None:
    question = f"May I rotate the API key? ({setup.transport})"
    arguments = {"question": question, "step": "rotate-key"}
    async with setup.client() as client:
        asking = asyncio.create_task(client.call_tool("ask_person", arguments))
        handoff = await asyncio.to_thread(setup.waiting_with, question)
        asking.cancel()
    # The client, and over stdio the server, are gone.
    status = json.loads(setup.cli("--json", "status", handoff))
    assert status["status"] == "waiting", status
    async with setup.client() as client:
        again = facts(await client.call_tool("ask_person", arguments))
        assert again["id"] == handoff and again["created"] is False, again
        assert again["state"] == "waiting", again
        # Another question without a step while this one waits: the
        # parent is busy, and the error names the waiting one.
        busy = await client.call_tool("ask_person", {"question": "Something else?"})
        assert handoff in tool_error(busy, "parent_busy")
    setup.cli("fail", handoff, "--reason", "not today")
    async with setup.client() as client:
        answered = facts(await client.call_tool("await_answer", {"id": handoff}))
        assert answered["status"] == "failed" and answered["text"] == "not today", answered


async def a_question_with_choices_is_answered_with_the_chosen_value(setup: Setup) -> None:
    question = f"Which region? ({setup.transport})"
    choices = [{"value": "eu", "label": "Europe"}, {"value": "us", "label": "United States"}]
    async with setup.client() as client:
        asking = asyncio.create_task(
            client.call_tool(
                "ask_person", {"question": question, "choices": choices, "step": "region"}
            )
        )
        handoff = await asyncio.to_thread(setup.waiting_with, question)
        status = json.loads(setup.cli("--json", "status", handoff))
        assert status["choices"] == choices, status
        await asyncio.to_thread(setup.cli, "answer", handoff, "--choice", "eu")
        answered = facts(await asking)
        assert answered["state"] == "answered", answered
        assert answered["answer"] == "eu", answered
        assert "eu" in (await client.call_tool("get_handoff", {"id": handoff})).content[0].text
    # A form: the person's fields come back as an object.
    question = f"Budget and owner? ({setup.transport})"
    form = {
        "type": "object",
        "properties": {
            "budget": {"type": "integer", "title": "Budget", "minimum": 0},
            "owner": {"type": "string", "title": "Owner"},
        },
        "required": ["budget"],
    }
    async with setup.client() as client:
        asking = asyncio.create_task(
            client.call_tool("ask_person", {"question": question, "form": form, "step": "budget"})
        )
        handoff = await asyncio.to_thread(setup.waiting_with, question)
        await asyncio.to_thread(
            setup.cli, "answer", handoff, "--set", "budget=300", "--set", "owner=ann"
        )
        answered = facts(await asking)
        assert answered["answer"] == {"budget": 300, "owner": "ann"}, answered
    # Nobody answers by the deadline: the question ends with on_expiry.
    async with setup.client() as client:
        expired = facts(
            await client.call_tool(
                "ask_person",
                {
                    "question": f"Deny unless someone says so? ({setup.transport})",
                    "choices": [{"value": "allow", "label": "Allow"}, {"value": "deny", "label": "Deny"}],
                    "expires_in": "1s",
                    "on_expiry": "deny",
                },
            )
        )
        assert expired["state"] == "expired" and expired["answer"] == "deny", expired
        tool_error(
            await client.call_tool(
                "ask_person",
                {"question": "q", "choices": choices, "on_expiry": "maybe", "expires_in": "1h"},
            ),
            "invalid_input",
        )


SCENARIOS = [
    tools_are_listed_with_schemas_and_descriptions,
    ask_person_gets_an_answer_given_at_the_command_line,
    await_answer_gets_an_answer_given_after_ask_person_returned_waiting,
    a_question_with_choices_is_answered_with_the_chosen_value,
    wrong_arguments_are_tool_errors_and_the_server_keeps_serving,
    a_client_gone_mid_wait_leaves_the_question_open_and_the_step_finds_it,
]



async def main() -> None:
    setup = Setup(sys.argv)
    for scenario in SCENARIOS:
        print(f"{setup.transport}: {scenario.__name__}", flush=True)
        await scenario(setup)
    print(f"{setup.transport}: all passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
