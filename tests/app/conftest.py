"""Fixtures shared by the app tests: `agent_live` (a served wiki of agent pages, over real HTTP) and its module-scoped
forms for tests that only read (`shared_agent_store`, `shared_agent_live`)."""

from tests.app.agent_fixtures import agent_live, shared_agent_live, shared_agent_settings, shared_agent_store

__all__ = ["agent_live", "shared_agent_live", "shared_agent_settings", "shared_agent_store"]
