"""The agent interface: pages as Markdown, llms.txt, token-budgeted answers and the MCP server.

`install_agents(app)` adds the Markdown routes (/llms.txt, /llms-full.txt,
/pages/{id}.md) and the MCP endpoint (/mcp) to the service. Call it before the
HTML routes are added, so `/pages/{id}.md` is not taken for a page id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from fastapi import FastAPI


def install_agents(app: FastAPI) -> None:
    """Add /llms.txt, /llms-full.txt, /pages/{id}.md and the streamable HTTP MCP endpoint /mcp."""
    from app.agents.cache import RenderedDocuments, documents_dir
    from app.agents.mcp_server import mount_http
    from app.agents.routes import router

    def folder() -> Path | None:  # beside the full-text folder the app's store searches (known once it is open)
        store = app.state.store
        return documents_dir(store.search_engine.directory) if store is not None else None

    app.state.agent_documents = RenderedDocuments(folder)
    app.include_router(router)
    mount_http(app)
