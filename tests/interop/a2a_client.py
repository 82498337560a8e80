"""Interop check: the official A2A Python SDK's client against a running warden.

Usage: python a2a_client.py BASE_URL

For each protocol version (1.0, and 0.3 through the SDK's compat transports), each
binding (JSON-RPC, HTTP+JSON) and each mode (blocking, streaming) it sends a message,
then gets, lists (1.0 only: 0.3 has no ListTasks) and cancels the task, and checks every
answer. Exits non-zero with a message on the first mismatch.
"""

import asyncio
import sys

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)


def check(cond, what):
    if not cond:
        raise SystemExit(f"interop mismatch: {what}")


async def client_for(url, config, version):
    """A client using only the card's interfaces at `version`, so the SDK picks that
    version's transport (its compat transports for 0.3)."""
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    keep = [i for i in card.supported_interfaces if i.protocol_version == version]
    check(keep, f"card has no {version} interfaces: {card.supported_interfaces}")
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)
    return ClientFactory(config).create(card)


async def round_trip(url, version, binding, streaming, n):
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding])
    client = await client_for(url, config, version)
    label = f"{version} {binding} streaming={streaming}"
    text = f"hello interop {n}"
    msg = Message(message_id=f"interop-{n}", role=Role.ROLE_USER, parts=[Part(text=text)])
    events = [ev async for ev in client.send_message(SendMessageRequest(message=msg))]
    kinds = [ev.WhichOneof("payload") for ev in events]
    if streaming:
        check(kinds == ["task", "status_update", "artifact_update", "status_update"], f"{label}: events {kinds}")
        final = events[-1].status_update.status.state
        check(events[2].artifact_update.artifact.parts[0].text == text, f"{label}: streamed artifact")
    else:
        check(kinds == ["task"], f"{label}: events {kinds}")
        final = events[0].task.status.state
    check(final == TaskState.TASK_STATE_COMPLETED, f"{label}: final state {final}")
    task_id = events[0].task.id

    got = await client.get_task(GetTaskRequest(id=task_id))
    check(got.status.state == TaskState.TASK_STATE_COMPLETED, f"{label}: get state {got.status.state}")
    check(got.artifacts[0].parts[0].text == text, f"{label}: artifact {got.artifacts}")
    check(got.history[0].parts[0].text == text, f"{label}: history {got.history}")

    if version == "1.0":
        listed = await client.list_tasks(ListTasksRequest(page_size=100))
        check(task_id in [t.id for t in listed.tasks], f"{label}: {task_id} not listed")
        check(listed.total_size == len(listed.tasks), f"{label}: total_size {listed.total_size}")

    try:
        await client.cancel_task(CancelTaskRequest(id=task_id))
        check(False, f"{label}: canceling a completed task succeeded")
    except Exception as e:  # the SDK raises its typed error
        check(type(e).__name__ == "TaskNotCancelableError", f"{label}: cancel raised {type(e).__name__}: {e}")

    try:
        await client.get_task(GetTaskRequest(id="00000000-0000-7000-8000-000000000000"))
        check(False, f"{label}: a missing task was found")
    except Exception as e:
        check(type(e).__name__ == "TaskNotFoundError", f"{label}: get missing raised {type(e).__name__}: {e}")
    await client.close()
    print(f"ok: {label}")


async def main(url):
    n = 0
    for version in ["1.0", "0.3"]:
        for binding in ["JSONRPC", "HTTP+JSON"]:
            for streaming in [False, True]:
                n += 1
                await round_trip(url, version, binding, streaming, n)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
