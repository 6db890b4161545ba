"""A scripted model server for the real agent CLIs, on 127.0.0.1.

One server speaks the three wire formats the agents use: Anthropic Messages
(Claude Code, server-sent events), OpenAI Responses (Codex CLI) and OpenAI
chat completions (aider). Each conversation is scripted turn by turn from the
request itself, not from a counter, so an agent's side requests (a title, a
quota probe) cannot shift the script: the first turn of a conversation edits
a file with the agent's own tool, the next one answers with the final
message (holding the verdict). Every request is kept for the test to read.

A test stub only: a threaded `http.server` is all it needs.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """What the model does: write `content` to `file_name`, then say `final`."""

    file_name: str = "AGENT_NOTE.md"
    content: str = "written by the agent\n"
    final: str = 'Done.\n\n```json\n{"pass": true, "score": 0.9, "reasons": ["ok"]}\n```\n'
    input_tokens: int = 1200
    output_tokens: int = 80
    # Tools the model calls first, one a turn, before the Write: (name, input),
    # e.g. ("mcp__orchestrator__add_subtask", {"title": ...}).
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass
class StubModel:
    script: Script = field(default_factory=Script)
    requests: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    # The headers of each POST, in order (to see which key an agent sent).
    headers: list[dict[str, str]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    # The next `limited` model calls answer 429 as the real API does when
    # the account's limit is reached (`rate_limit_answer`), resetting
    # `reset_seconds` from the call.
    limited: int = 0
    reset_seconds: int = 1800

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> StubModel:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                stub.requests.append(("HEAD", self.path, None))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                stub.requests.append(("GET", self.path, None))
                body = b'{"data": [], "models": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                stub.requests.append(("POST", self.path, body))
                stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                path = self.path.split("?", 1)[0]
                limit = stub.rate_limit_answer(path)
                if limit is not None:
                    self._json(limit[1], status=429, headers=limit[0])
                elif path.endswith("/messages/count_tokens"):
                    self._json({"input_tokens": 10})
                elif path.endswith("/messages"):
                    self._events(stub.anthropic(body), named=True)
                elif path.endswith("/responses"):
                    self._events(stub.responses(body), named=True)
                elif path.endswith("/chat/completions"):
                    self._chat(body)
                else:
                    self._json({"error": {"message": f"stub: no {path}"}}, status=404)

            def _json(
                self, data: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
            ) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _events(self, events: list[dict[str, Any]], *, named: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    head = f"event: {event['type']}\n" if named else ""
                    self.wfile.write(f"{head}data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def _chat(self, body: dict[str, Any]) -> None:
                text = stub.chat_reply(body)
                if not body.get("stream"):
                    self._json(
                        {
                            "id": "chatcmpl-stub",
                            "object": "chat.completion",
                            "model": body.get("model", "stub"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": stub.chat_usage(),
                        }
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                chunks: list[dict[str, Any]] = [
                    {"role": "assistant", "content": ""},
                    {"content": text},
                ]
                for delta in chunks:
                    self._chunk({"delta": delta, "finish_reason": None})
                self._chunk({"delta": {}, "finish_reason": "stop"}, usage=stub.chat_usage())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _chunk(self, choice: dict[str, Any], usage: dict[str, int] | None = None) -> None:
                data: dict[str, Any] = {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "stub",
                    "choices": [{"index": 0, **choice}],
                }
                if usage is not None:
                    data["usage"] = usage
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def rate_limit_answer(self, path: str) -> tuple[dict[str, str], dict[str, Any]] | None:
        """(headers, body) of a 429, the way each API sends one, while
        `limited` calls are left. Anthropic: `rate_limit_error` with
        `retry-after` and the subscription's `anthropic-ratelimit-unified-*`
        headers; OpenAI (what Codex reads for a ChatGPT plan): a
        `usage_limit_reached` error with `resets_at` / `resets_in_seconds`."""
        is_model_call = path.endswith(("/messages", "/responses"))
        if self.limited <= 0 or not is_model_call:
            return None
        self.limited -= 1
        reset = int(time.time()) + self.reset_seconds
        if path.endswith("/messages"):
            return (
                {
                    "retry-after": str(self.reset_seconds),
                    "anthropic-ratelimit-unified-status": "rejected",
                    "anthropic-ratelimit-unified-reset": str(reset),
                    "anthropic-ratelimit-unified-representative-claim": "five_hour",
                    "request-id": "req_stub_limit",
                    "x-should-retry": "true",
                },
                {
                    "type": "error",
                    "error": {
                        "type": "rate_limit_error",
                        "message": "This request would exceed your account's rate limit. "
                        "Please try again later.",
                    },
                    "request_id": "req_stub_limit",
                },
            )
        return (
            {
                "retry-after": str(self.reset_seconds),
                "x-codex-primary-used-percent": "100",
                "x-codex-primary-window-minutes": "300",
                "x-codex-primary-reset-after-seconds": str(self.reset_seconds),
            },
            {
                "error": {
                    "type": "usage_limit_reached",
                    "message": "The usage limit has been reached",
                    "plan_type": "plus",
                    "resets_at": reset,
                    "resets_in_seconds": self.reset_seconds,
                }
            },
        )

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def posts(self, suffix: str) -> list[dict[str, Any]]:
        return [
            body
            for method, path, body in self.requests
            if method == "POST" and path.split("?", 1)[0].endswith(suffix) and body is not None
        ]

    # -- Anthropic Messages (Claude Code) ---------------------------------------------

    def anthropic(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
        tools = {tool.get("name") for tool in body.get("tools") or []}
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        usage = {"input_tokens": self.script.input_tokens, "output_tokens": 0}
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "claude-stub"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            }
        ]
        calls = self.script.tool_calls
        # A `WaitForMcpServers` that answered "ready: false" is called again,
        # as a model told "try again" does; the script does not move on.
        turn -= sum(
            1
            for m in messages
            for block in (m.get("content") if isinstance(m.get("content"), list) else [])
            if isinstance(block, dict)
            and block.get("type") == "tool_result"
            and str(block.get("content", "")).startswith("ready: false")
        )
        if "Write" in tools and turn <= len(calls):
            name, tool_input = (
                calls[turn]
                if turn < len(calls)
                else ("Write", {"file_path": self.script.file_name, "content": self.script.content})
            )
            events += [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:12]}",
                        "name": name,
                        "input": {},
                    },
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)},
                },
                {"type": "content_block_stop", "index": 0},
            ]
            stop = "tool_use"
        else:
            text = self.script.final if "Write" in tools else "Stub"
            events += [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
                {"type": "content_block_stop", "index": 0},
            ]
            stop = "end_turn"
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": self.script.output_tokens},
            },
            {"type": "message_stop"},
        ]
        return events

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool result Claude Code sent back, as the model saw it."""
        found: dict[str, dict[str, Any]] = {}
        for body in self.posts("/v1/messages"):
            for message in body.get("messages") or []:
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        found[block.get("tool_use_id", "")] = block
        return list(found.values())

    # -- OpenAI Responses (Codex CLI) ---------------------------------------------------

    def responses(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input") or []
        calls = sum(1 for item in items if item.get("type") == "function_call")
        response_id = f"resp_{uuid.uuid4().hex[:12]}"
        if calls == 0:
            patch = (
                "*** Begin Patch\n"
                f"*** Add File: {self.script.file_name}\n"
                + "".join(f"+{line}\n" for line in self.script.content.splitlines())
                + "*** End Patch\n"
            )
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "call_id": f"call_{uuid.uuid4().hex[:12]}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"}),
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "role": "assistant",
                "content": [{"type": "output_text", "text": self.script.final, "annotations": []}],
            }
        return [
            {"type": "response.created", "response": {"id": response_id}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {
                    "id": response_id,
                    "usage": {
                        "input_tokens": self.script.input_tokens,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": self.script.output_tokens,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": self.script.input_tokens + self.script.output_tokens,
                    },
                },
            },
        ]

    # -- OpenAI chat completions (aider) ------------------------------------------------

    def chat_reply(self, body: dict[str, Any]) -> str:
        """aider has no tools: the edit is a SEARCH/REPLACE block in the
        reply text (its `diff` format; an empty SEARCH makes a new file),
        then the verdict, in one message."""
        return (
            f"{self.script.file_name}\n```\n<<<<<<< SEARCH\n=======\n{self.script.content}"
            f">>>>>>> REPLACE\n```\n\n{self.script.final}"
        )

    def chat_usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.script.input_tokens,
            "completion_tokens": self.script.output_tokens,
            "total_tokens": self.script.input_tokens + self.script.output_tokens,
        }
