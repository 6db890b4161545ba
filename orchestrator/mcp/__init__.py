"""The door agents reach the orchestrator through: `orchestrator mcp`, its
tools, the tick's socket for a sandboxed attempt, and the recipe lines that
register it with an agent CLI.

A package of its own, above the library face: the door adds subtasks
through `api`, and nothing in the agent runtime (`agents/`) may import that.
"""
