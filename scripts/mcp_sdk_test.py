#!/usr/bin/env python3
"""The bridge's MCP endpoint driven by the official Python SDK (the `mcp` package), against a
running bridge in demo mode (loopback only): an agent signed in as alice initializes, lists the
tools and resource templates, subscribes and queries as alice, calls a method the tools file
lists, is refused one it does not list, subscribes to a document resource and hears its update
when another session of alice's changes it; a signed-out agent is offered the public tools only.

Usage: scripts/mcp_sdk_test.py BRIDGE_URL (scripts/mcp-sdk-test.sh starts the demo and a venv).
"""

import asyncio
import json
import sys
import urllib.request

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


def rest(url, method, path, body=None, token=None):
    request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def check(condition, what):
    if not condition:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


async def signed_in(url):
    alice = rest(url, "POST", "/v1/sessions", {"username": "alice", "password": "secret"})["token"]
    writer = rest(url, "POST", "/v1/sessions", {"username": "alice", "password": "secret"})["token"]
    rest(url, "POST", "/v1/subscriptions", {"name": "myTasks"}, writer)
    updated = asyncio.Event()
    uris = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ResourceUpdatedNotification):
            uris.append(str(message.root.params.uri))
            updated.set()

    async with streamablehttp_client(url + "/mcp", headers={"Authorization": "Bearer " + alice}) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            check(init.serverInfo.name == "ddp-bridge", "initialize answers as ddp-bridge, version " + init.protocolVersion)
            tools = {tool.name for tool in (await session.list_tools()).tools}
            check({"query", "get_document", "subscribe", "echo", "whoami"} <= tools, "tools listed: " + ", ".join(sorted(tools)))
            templates = [t.uriTemplate for t in (await session.list_resource_templates()).resourceTemplates]
            check("ddp://{collection}/{id}" in templates, "resource templates listed")
            subscribed = await session.call_tool("subscribe", {"name": "myTasks"})
            check(not subscribed.isError, "subscribed to myTasks as alice")
            queried = await session.call_tool("query", {"collection": "tasks", "sort": {"_id": 1}})
            ids = [d["_id"] for d in queried.structuredContent["documents"]]
            check(ids == ["task-a1", "task-a2"], "query as alice sees alice's tasks: " + str(ids))
            echoed = await session.call_tool("echo", {"text": "hello"})
            check(echoed.structuredContent == {"result": ["hello"]}, "a listed method is a tool: " + str(echoed.structuredContent))
            try:
                refused = await session.call_tool("boom", {})
                check(refused.isError, "a method the tools file does not list is refused")
            except McpError as error:
                check("Unknown tool" in str(error), "a method the tools file does not list is refused: " + str(error))
            document = await session.read_resource("ddp://tasks/task-a1")
            check(json.loads(document.contents[0].text)["_id"] == "task-a1", "a document read as a resource")
            await session.subscribe_resource("ddp://tasks/task-a1")
            # The SDK opens the session's server stream after initialize; a change made by
            # another of alice's sessions reaches it (tried again while the stream opens).
            for _ in range(20):
                rest(url, "PATCH", "/v1/collections/tasks/task-a1", {"text": "changed by the writer"}, writer)
                try:
                    await asyncio.wait_for(updated.wait(), timeout=0.5)
                    break
                except asyncio.TimeoutError:
                    continue
            check(uris and uris[0] == "ddp://tasks/task-a1", "the update notification came: " + str(uris))


async def signed_out(url):
    async with streamablehttp_client(url + "/mcp") as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            check(tools == ["list_public_publications", "query_public"], "signed out, only the public tools: " + str(tools))


async def main(url):
    await asyncio.wait_for(signed_in(url), timeout=60)
    await asyncio.wait_for(signed_out(url), timeout=30)
    print("MCP through the official Python SDK: passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
