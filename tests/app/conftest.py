"""Fixtures shared by the app tests: `agent_live` (a served wiki of agent pages, over real HTTP)."""

from tests.app.agent_fixtures import agent_live

__all__ = ["agent_live"]
