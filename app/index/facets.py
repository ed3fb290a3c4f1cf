"""Facets a KernelWiki repository's pages classify themselves by, beyond kernelwiki's architectures/languages/tags.

The index writes one FacetRow per (page, field, value) for the fields below;
the listing filters, the facet counts and the queries/ views (app/index/repository_queries.py)
read them. Languages live in their own table already (LanguageRow).
"""

from __future__ import annotations

from typing import Any

from snippets.page import Page

FACET_FIELDS = ("techniques", "hardware_features", "kernel_types", "symptoms", "candidate_techniques")
"""List fields stored as facets (values as written)."""

FILTER_FACETS = {"technique": "techniques", "hardware_feature": "hardware_features", "kernel_type": "kernel_types"}
"""Filter parameter (of search and the page listing) → the facet field it selects by (values case-insensitive)."""

REPO_FACET = "repo"
"""A PR source page's `repo` (scalar), stored as a facet for the by-repo view."""


def facet_rows(page: Page) -> list[dict[str, Any]]:
    """FacetRow values of a page."""
    rows: list[dict[str, Any]] = []
    for name in FACET_FIELDS:
        value = page.front.get(name)
        values = value if isinstance(value, list) else ([] if value is None else [value])
        for v in dict.fromkeys(str(x) for x in values if isinstance(x, (str, int, float))):
            rows.append({"page_id": page.id, "facet": name, "value": v})
    repo = page.front.get(REPO_FACET)
    if isinstance(repo, str) and repo:
        rows.append({"page_id": page.id, "facet": REPO_FACET, "value": repo})
    return rows
