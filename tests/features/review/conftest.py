"""The review loop's tests share the landing's GitHub look-alike."""

from __future__ import annotations

from features.landing.github_api import github

__all__ = ["github"]
