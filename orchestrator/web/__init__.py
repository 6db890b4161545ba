"""`orchestrator serve` and `report --html`: server-rendered pages for people at the gate.

Needs the `web` extra (Starlette, uvicorn, Jinja2, markdown-it-py, argon2-cffi);
the core package never imports this one.
"""
