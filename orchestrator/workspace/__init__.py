"""What a task's workspace holds: its fingerprint, git access and change listing.

The workspace belongs to the worker, the least trusted party, so everything
here reads it defensively (no links followed, no configured git commands).
"""
