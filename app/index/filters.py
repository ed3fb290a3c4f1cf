"""Page filters (type, arch, tag, language, confidence, the facets): their values and their SQL, shared by
search, page listings and facet counts."""

from __future__ import annotations

from dataclasses import dataclass

from app.index.facets import FILTER_FACETS
from snippets.architectures import family, normalize_architecture


@dataclass(frozen=True)
class Filters:
    """Filters shared by search and page listing; None means 'any'."""

    type: str | None = None
    arch: str | None = None  # any spelling; matched by family (sm90a ≡ sm90)
    tag: str | None = None
    language: str | None = None
    confidence: str | None = None
    technique: str | None = None  # the facets of app.index.facets.FILTER_FACETS, case-insensitive
    hardware_feature: str | None = None
    kernel_type: str | None = None

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass(frozen=True)
class FilterProblem:
    """A filter value that matches no page, with the values that exist (an API answers 422 with it)."""

    parameter: str
    value: str
    allowed: list[str]

    @property
    def message(self) -> str:
        shown = ", ".join(self.allowed[:50]) + (", …" if len(self.allowed) > 50 else "")
        return f"{self.parameter}: there is no value '{self.value}'; allowed: {shown or '(none in this wiki)'}"


def normalize_arch(value: str) -> str:
    """Any spelling of an architecture → its family (sm90a ≡ sm90), as the index stores it."""
    return family(normalize_architecture(value))


def filter_sql(filters: Filters, column: str = "page_id") -> tuple[str, dict[str, str]]:
    """The SQL condition (' AND …' clauses on `column`, a page id) and its parameters for `filters`."""
    parts: list[str] = []
    params: dict[str, str] = {}
    if filters.type:
        parts.append(f"{column} IN (SELECT id FROM page WHERE type = :f_type)")
        params["f_type"] = filters.type
    if filters.confidence:
        parts.append(f"{column} IN (SELECT id FROM page WHERE confidence = :f_conf)")
        params["f_conf"] = filters.confidence
    if filters.arch:
        parts.append(f"{column} IN (SELECT page_id FROM architecture WHERE family = :f_arch)")
        params["f_arch"] = normalize_arch(filters.arch)
    if filters.tag:
        parts.append(f"{column} IN (SELECT page_id FROM tag WHERE lower(tag) = lower(:f_tag))")
        params["f_tag"] = filters.tag
    if filters.language:
        parts.append(f"{column} IN (SELECT page_id FROM language WHERE lower(language) = lower(:f_lang) OR language = '*')")
        params["f_lang"] = filters.language
    for name, field in FILTER_FACETS.items():
        value = getattr(filters, name)
        if value:
            parts.append(
                f"{column} IN (SELECT page_id FROM facet WHERE facet = :f_{name}_field AND lower(value) = lower(:f_{name}))"
            )
            params[f"f_{name}_field"] = field
            params[f"f_{name}"] = value
    return "".join(" AND " + p for p in parts), params
