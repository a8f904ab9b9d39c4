"""The Dependency Compatibility story driven through `a2a mcp` by the
official MCP Python SDK (PyPI `mcp`), as a stateless host would.

The client keeps no A2A state of its own: every id it passes comes from the
previous tool result (the structured content), exactly as a model would read
it. Steps: list the agents, send the project's package.json and
package-lock.json, get the question (input-required), answer "Node.js 24",
receive the report, refine it, list two versions, accept the second, read it
as a resource.

Usage:
  python story.py --a2a BIN --agent URL --ledger PATH --files DIR
                  [--transport stdio|http] [--restart]

  --transport stdio  the SDK's stdio client starts `BIN mcp ...` (default)
  --transport http   `BIN mcp ... --http 127.0.0.1:0` is started, and the
                     SDK's streamable HTTP client connects to it
  --restart          a new host session (a new `a2a mcp` process) for every
                     tool call: the work continues from the ledger alone

Exit status 0 when every check holds; the failing check otherwise.
"""

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def check(cond, what, detail=None):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        if detail is not None:
            print(json.dumps(detail, indent=2) if not isinstance(detail, str) else detail, file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


class Host:
    """Opens MCP sessions to `a2a mcp`, once or once per call."""

    def __init__(self, args):
        self.args = args
        self.mcp_args = ["mcp", "-a", f"depcompat={args.agent}", "--ledger", args.ledger]
        self.stack = None
        self.session = None
        self.http = None
        self.progress = []

    @contextlib.asynccontextmanager
    async def open(self):
        async with contextlib.AsyncExitStack() as stack:
            if self.args.transport == "stdio":
                params = StdioServerParameters(
                    command=self.args.a2a, args=self.mcp_args, cwd=self.args.files
                )
                read, write = await stack.enter_async_context(stdio_client(params))
            else:
                url = self.start_http()
                stack.callback(self.stop_http)
                read, write = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            yield session

    def start_http(self):
        self.http = subprocess.Popen(
            [self.args.a2a, *self.mcp_args, "--http", "127.0.0.1:0"],
            cwd=self.args.files,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.http.stdout.readline()
        url = next((w for w in line.split() if w.startswith("http://")), None)
        check(url is not None, "a2a mcp --http announces its URL", line)
        return url

    def stop_http(self):
        if self.http is not None:
            self.http.terminate()
            try:
                self.http.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.http.kill()
            self.http = None

    async def call(self, session, name, arguments):
        async def on_progress(progress, total, message):
            self.progress.append(message)

        result = await session.call_tool(name, arguments, progress_callback=on_progress)
        text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        print(f"--- {name} {json.dumps(arguments)}\n{text}")
        check(not result.is_error, f"{name} succeeds", text)
        check(isinstance(result.structured_content, dict), f"{name} returns structured content")
        return result.structured_content, text


async def story(args):
    host = Host(args)
    one = None
    if not args.restart:
        one = host.open()
        session = await one.__aenter__()

    async def call(name, arguments):
        if args.restart:
            async with host.open() as s:
                return await host.call(s, name, arguments)
        return await host.call(session, name, arguments)

    async def tools():
        if args.restart:
            async with host.open() as s:
                return await s.list_tools()
        return await session.list_tools()

    try:
        listed = await tools()
        names = {t.name for t in listed.tools}
        for t in ["list_agents", "describe_agent", "send_message", "continue_task", "get_task",
                  "cancel_task", "list_versions", "accept_version", "refine"]:
            check(t in names, f"tool {t} is listed")
        send = next(t for t in listed.tools if t.name == "send_message")
        check(set(send.input_schema.get("required", [])) >= {"agent", "text"},
              "send_message's schema requires agent and text", send.input_schema)

        agents, _ = await call("list_agents", {})
        check(agents["agents"][0]["name"] == "depcompat", "list_agents names the agent", agents)
        check(len(agents["agents"][0]["skills"]) > 0, "list_agents lists its skills", agents)

        first, text = await call("send_message", {
            "agent": "depcompat",
            "text": "Check whether payment-service can move to the new runtime",
            "files": ["package.json", "package-lock.json"],
        })
        check(first["state"] == "input-required", "the agent asks a question", first)
        check("Node.js" in first.get("question", ""), "the question asks for the Node.js version", first)
        check("continue_task" in first["next"] and first["taskId"] in first["next"],
              "the result says to answer with continue_task(task_id)", first)

        report, text = await call("continue_task", {"task_id": first["taskId"], "text": "Node.js 24"})
        check(report["state"] == "completed", "the answer completes the task", report)
        check(report["taskId"] == first["taskId"], "the same task goes on")
        md = [a for a in report["artifacts"] if a["name"].endswith(".md")]
        check(len(md) == 1, "a Markdown report", report)
        check("Dependency compatibility report" in md[0]["text"], "the report's text is in the result")
        if not args.restart and args.transport == "stdio":
            check(len(host.progress) > 0, "progress notifications came while the task ran", host.progress)

        refined, _ = await call("refine", {"artifact_id": md[0]["artifactId"], "text": "sort the fixes by risk"})
        check(refined["state"] == "completed", "the refinement completes", refined)
        check(refined["contextId"] == first["contextId"], "the refinement is in the same context")
        check(refined["taskId"] != first["taskId"], "the refinement is a new task")
        md2 = [a for a in refined["artifacts"] if a["name"] == md[0]["name"]]
        check(len(md2) == 1 and md2[0]["version"] == 2, "the refined report is version 2", refined)
        check("sorted by risk" in md2[0]["text"], "the refined report is sorted by risk", md2)

        versions, _ = await call("list_versions", {"context_id": first["contextId"]})
        mine = [v for v in versions["versions"] if v["name"] == md[0]["name"]]
        check([v["version"] for v in mine] == [1, 2], "two versions of the report", versions)
        check(mine[1]["previousArtifactId"] == md[0]["artifactId"], "version 2 refines version 1", mine)

        accepted, _ = await call("accept_version", {"artifact_id": mine[1]["artifactId"]})
        check(accepted["accepted"] and accepted["version"] == 2, "the second version is accepted", accepted)
        versions, _ = await call("list_versions", {"context_id": first["contextId"]})
        flags = [v["accepted"] for v in versions["versions"] if v["name"] == md[0]["name"]]
        check(flags == [False, True], "only the second version is accepted", versions)

        if args.restart:
            async with host.open() as s:
                res = await s.read_resource(md2[0]["uri"])
        else:
            res = await session.read_resource(md2[0]["uri"])
        body = "".join(getattr(c, "text", "") for c in res.contents)
        check("sorted by risk" in body, "the accepted version reads as a resource", body[:200])
    finally:
        if one is not None:
            await one.__aexit__(None, None, None)
    print("the story holds")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a2a", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--files", required=True)
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--restart", action="store_true")
    args = p.parse_args()
    asyncio.run(story(args))


if __name__ == "__main__":
    main()
