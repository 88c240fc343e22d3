#!/usr/bin/env python3
"""A minimal MCP agent for ddp-bridge, with the official Python SDK (pip install mcp).

It connects as the user whose token it is given, lists the tools, subscribes to a publication,
queries a collection, and then prints the resource notifications for a document for a while.

    python3 examples/mcp_agent.py http://127.0.0.1:8080 TOKEN myTasks tasks task-a1 [SECONDS]

TOKEN is a Meteor login token or a bridge session token (POST /v1/sessions answers one).
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def main(url, token, publication, collection, document, seconds):
    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ResourceUpdatedNotification):
            print("updated:", message.root.params.uri, flush=True)

    headers = {"Authorization": "Bearer " + token}
    async with streamablehttp_client(url + "/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            print("connected:", init.serverInfo.name, init.protocolVersion)
            print("tools:", ", ".join(tool.name for tool in (await session.list_tools()).tools))
            await session.call_tool("subscribe", {"name": publication})
            answer = await session.call_tool("query", {"collection": collection, "limit": 5})
            print("query:", json.dumps(answer.structuredContent))
            await session.subscribe_resource("ddp://%s/%s" % (collection, document))
            print("watching ddp://%s/%s for %s s" % (collection, document, seconds), flush=True)
            await asyncio.sleep(seconds)


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6]) if len(sys.argv) > 6 else 30))
