"""The index's one reading interface: search, pages, snippets, evidence, graph.

Every function the API and the HTML views need is a method here, returning
the `*Public` models of app/schemas.py, so both views are fed by the same data
functions. Backend-specific SQL is confined to the search backend.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlencode

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine

from app.db import create_schema, make_engine, search_backend
from app.claims import claim_problems, facts_from_public
from app.evidence_store import EvidenceStore, page_evidence_text
from app.index import IndexReport, reindex
from app.models import (
    AliasRow,
    ArchitectureRow,
    DiagnosticRow,
    FileRow,
    LinkRow,
    PageRow,
    SectionRow,
    SnippetRow,
    StateRow,
    TagRow,
)
from app.schemas import (
    LinkPublic,
    PageList,
    PagePublic,
    PageSummary,
    SearchPublic,
    SearchResult,
    SectionPublic,
    SectionRef,
)
from app.search import PAGE_ROW, Hit
from snippets.architectures import family
from app.text import correct, excerpt, query_terms, typo_limit


@dataclass(frozen=True)
class Filters:
    """Filters shared by search and page listing; None means 'any'."""

    type: str | None = None
    arch: str | None = None  # any spelling; matched by family (sm90a ≡ sm90)
    tag: str | None = None
    language: str | None = None
    confidence: str | None = None

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


def _normalize_arch(value: str) -> str:
    from snippets.architectures import normalize_architecture

    return family(normalize_architecture(value))


class Store:
    """SQL index access for one database URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = make_engine(url)
        self.backend = search_backend(url)
        self.evidence = EvidenceStore(self.engine)
        self._cache_lock = threading.Lock()
        self._cache_key: tuple[Any, ...] | None = None
        self._facts: dict[str, tuple[str, list[str], list[str]]] = {}
        self._vocab: dict[int, list[str]] | None = None

    # -- writing -------------------------------------------------------------

    def create_schema(self) -> None:
        create_schema(self.engine, self.backend)

    def reindex(self, root: Path, force: bool = False) -> IndexReport:
        return reindex(self.engine, self.backend, root, force=force)

    # -- cached facts for facets and typo correction ---------------------------

    def _generation(self, conn: Any) -> tuple[Any, ...]:
        return (conn.execute(select(StateRow.value).where(StateRow.key == "generation")).scalar(),)

    def _ensure_cache(self, conn: Any) -> None:
        key = self._generation(conn)
        if key == self._cache_key:
            return
        with self._cache_lock:
            if key == self._cache_key:
                return
            facts: dict[str, tuple[str, list[str], list[str]]] = {}
            for pid, ptype in conn.execute(select(PageRow.id, PageRow.type)):
                facts[pid] = (ptype, [], [])
            for pid, fam in conn.execute(select(ArchitectureRow.page_id, ArchitectureRow.family)):
                if pid in facts and fam not in facts[pid][1]:
                    facts[pid][1].append(fam)
            for pid, tag in conn.execute(select(TagRow.page_id, TagRow.tag)):
                if pid in facts:
                    facts[pid][2].append(tag)
            self._facts = facts
            self._vocab = None
            self._cache_key = key

    def _vocabulary(self, conn: Any) -> dict[int, list[str]]:
        if self._vocab is None:
            by_len: dict[int, list[str]] = defaultdict(list)
            for word in self.backend.vocabulary(conn):
                if word.isalpha():
                    by_len[len(word)].append(word)
            self._vocab = dict(by_len)
        return self._vocab

    def _correct(self, conn: Any, term: str) -> str | None:
        """A typo's correction: from the backend's nearest words when it offers them, else the whole vocabulary."""
        if not typo_limit(term):
            return None
        candidates = getattr(self.backend, "candidates", None)
        if candidates is None:
            return correct(term, self._vocabulary(conn))
        by_len: dict[int, list[str]] = defaultdict(list)
        for word in candidates(conn, term):
            by_len[len(word)].append(word)
        return correct(term, by_len)

    # -- filters ---------------------------------------------------------------

    @staticmethod
    def _filter_sql(filters: Filters, column: str = "page_id") -> tuple[str, dict[str, str]]:
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
            params["f_arch"] = _normalize_arch(filters.arch)
        if filters.tag:
            parts.append(f"{column} IN (SELECT page_id FROM tag WHERE lower(tag) = lower(:f_tag))")
            params["f_tag"] = filters.tag
        if filters.language:
            parts.append(
                f"{column} IN (SELECT page_id FROM language WHERE lower(language) = lower(:f_lang) OR language = '*')"
            )
            params["f_lang"] = filters.language
        return "".join(" AND " + p for p in parts), params

    def _facets(self, page_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        types: Counter[str] = Counter()
        archs: Counter[str] = Counter()
        tags: Counter[str] = Counter()
        for pid in page_ids:
            fact = self._facts.get(pid)
            if fact is None:
                continue
            types[fact[0]] += 1
            archs.update(fact[1])
            tags.update(fact[2])
        return {
            "type": dict(types.most_common()),
            "arch": dict(archs.most_common()),
            "tag": dict(tags.most_common(30)),
        }

    # -- search ----------------------------------------------------------------

    def resolve(self, name: str) -> str | None:
        """Alias, title or id (case-insensitive) → page id."""
        needle = name.strip().lower()
        if not needle:
            return None
        with self.engine.connect() as conn:
            for stmt in (
                select(PageRow.id).where(PageRow.id == needle),  # ids are lowercase by rule
                select(AliasRow.page_id).where(AliasRow.alias_lower == needle).order_by(AliasRow.page_id),
                select(PageRow.id).where(PageRow.title_lower == needle).order_by(PageRow.id),
            ):
                found = conn.execute(stmt.limit(1)).scalar()
                if found:
                    return found
        return None

    def search(self, query: str, filters: Filters, limit: int = 20, offset: int = 0, max_chars: int = 2000) -> SearchPublic:
        """Ranked, filtered, faceted section-level search; any input gives results or none."""
        started = time.perf_counter()
        query = query[:max_chars]
        terms = query_terms(query)
        did_you_mean: str | None = None
        hits = []
        filter_sql, params = self._filter_sql(filters)
        with self.engine.connect() as conn:
            self._ensure_cache(conn)
            if terms:
                hits = self.backend.match(conn, terms, False, filter_sql, params)
                if not hits:
                    fixed = [self._correct(conn, t) or t for t in terms]
                    if fixed != terms:
                        hits = self.backend.match(conn, fixed, False, filter_sql, params)
                        if hits:
                            did_you_mean = " ".join(fixed)
                            terms = fixed
                if not hits and len(terms) > 1:
                    hits = self.backend.match(conn, terms, True, filter_sql, params)
            exact = self.resolve(query) if query.strip() else None
            hits.sort(key=lambda h: -h.score)
            if exact is not None:
                pos = next((i for i, h in enumerate(hits) if h.page_id == exact), None)
                if pos is not None:
                    hits.insert(0, hits.pop(pos))
                elif self._passes(conn, exact, filters):
                    hits.insert(0, Hit(exact, PAGE_ROW, (hits[0].score if hits else 0.0) + 1.0, []))
            total = len(hits)
            window = hits[offset : offset + limit]
            results = self._results(conn, window, terms)
            facets = self._facets(h.page_id for h in hits)
        next_q = None
        if offset + limit < total:
            next_q = urlencode({"q": query, **filters.as_params(), "limit": limit, "offset": offset + limit})
        return SearchPublic(
            query=query, total=total, limit=limit, offset=offset, next=next_q, results=results,
            facets=facets, did_you_mean=did_you_mean, took_ms=round((time.perf_counter() - started) * 1000, 3),
        )  # fmt: skip

    def _passes(self, conn: Any, page_id: str, filters: Filters) -> bool:
        """Whether a page (an exact name match) passes the filters."""
        filter_sql, params = self._filter_sql(filters, column="id")
        return conn.execute(text(f"SELECT 1 FROM page WHERE id = :pid {filter_sql}"), {"pid": page_id, **params}).first() is not None

    def _results(self, conn: Any, hits: list[Any], terms: list[str]) -> list[SearchResult]:
        if not hits:
            return []
        ids = [h.page_id for h in hits]
        pages = {r.id: r for r in conn.execute(select(PageRow.id, PageRow.title, PageRow.type, PageRow.path, PageRow.meta).where(PageRow.id.in_(ids)))}
        sections = {
            r.id: r for r in conn.execute(
                select(SectionRow.id, SectionRow.heading, SectionRow.anchor, SectionRow.text, SectionRow.level)
                .where(SectionRow.id.in_([h.section_id for h in hits]))
            )
        }  # fmt: skip
        # A page matched by title, alias or tag alone: excerpt its first section.
        first: dict[str, Any] = {}
        title_only = [h.page_id for h in hits if h.section_id == PAGE_ROW]
        if title_only:
            for r in conn.execute(
                select(SectionRow.page_id, SectionRow.text, SectionRow.position)
                .where(SectionRow.page_id.in_(title_only)).order_by(SectionRow.page_id, SectionRow.position)
            ):  # fmt: skip
                first.setdefault(r.page_id, r)
        out = []
        for hit in hits:
            page = pages.get(hit.page_id)
            if page is None:
                continue
            meta = json.loads(page.meta)
            sec = sections.get(hit.section_id) or first.get(hit.page_id)
            ref = SectionRef(heading=sec.heading, anchor=sec.anchor) if hit.section_id != PAGE_ROW and sec is not None and sec.anchor else None
            out.append(SearchResult(
                id=page.id, title=page.title, type=page.type, path=page.path,
                architectures=meta.get("architectures", []), score=round(hit.score, 4), section=ref,
                snippet=excerpt(sec.text if sec is not None else "", terms),
            ))  # fmt: skip
        return out

    # -- pages -----------------------------------------------------------------

    def list_pages(self, filters: Filters, limit: int = 50, offset: int = 0) -> PageList:
        filter_sql, params = self._filter_sql(filters, column="id")
        where = "WHERE 1=1" + filter_sql
        with self.engine.connect() as conn:
            self._ensure_cache(conn)
            ids = [r[0] for r in conn.execute(text(f"SELECT id FROM page {where} ORDER BY type, title, id"), params)]
            window = ids[offset : offset + limit]
            rows = {r.id: r for r in conn.execute(select(PageRow.id, PageRow.title, PageRow.type, PageRow.path, PageRow.meta, PageRow.confidence).where(PageRow.id.in_(window)))}
        pages = []
        for pid in window:
            r = rows[pid]
            meta = json.loads(r.meta)
            pages.append(PageSummary(id=r.id, title=r.title, type=r.type, path=r.path, architectures=meta.get("architectures", []), tags=meta.get("tags", []), confidence=r.confidence))
        next_q = urlencode({**filters.as_params(), "limit": limit, "offset": offset + limit}) if offset + limit < len(ids) else None
        return PageList(total=len(ids), limit=limit, offset=offset, next=next_q, pages=pages, facets=self._facets(ids))

    def page_by_path(self, path: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(select(PageRow.id).where(PageRow.path == path)).scalar()

    def page_sources(self, page_ids: list[str], conn: Connection | None = None) -> dict[str, tuple[str, int]]:
        """Each existing page's Markdown body and the file line it starts on (for the Markdown views of app/agents)."""
        if conn is None:
            with self.engine.connect() as own:
                return self.page_sources(page_ids, own)
        found: dict[str, tuple[str, int]] = {}
        for i in range(0, len(page_ids), 500):
            stmt = select(PageRow.id, PageRow.body, PageRow.body_line).where(PageRow.id.in_(page_ids[i : i + 500]))
            found.update({r.id: (r.body, r.body_line) for r in conn.execute(stmt)})
        return found

    def get_page(self, page_id: str) -> PagePublic | None:
        """Everything about a page: front matter, HTML, sections, links, backlinks, snippets with evidence."""
        with self.engine.connect() as conn:
            page = conn.execute(PageRow.__table__.select().where(PageRow.id == page_id)).first()
            if page is None:
                return None
            meta = json.loads(page.meta)
            sections = [
                SectionPublic(level=s.level, heading=s.heading, anchor=s.anchor, line=s.line)
                for s in conn.execute(SectionRow.__table__.select().where(SectionRow.page_id == page_id).order_by(SectionRow.position))
                if s.anchor
            ]
            links = conn.execute(LinkRow.__table__.select().where(LinkRow.source_id == page_id).order_by(LinkRow.id)).all()
            back = conn.execute(select(LinkRow.source_id, LinkRow.kind).where(LinkRow.target_id == page_id)).all()
            wanted = {l.target_id for l in links} | {b.source_id for b in back}
            info = {
                r.id: r for r in conn.execute(select(PageRow.id, PageRow.title, PageRow.type, PageRow.meta).where(PageRow.id.in_(wanted)))
            }

            def link(pid: str, resolved: bool) -> LinkPublic:
                r = info.get(pid)
                url = json.loads(r.meta).get("url") if r is not None else None
                return LinkPublic(id=pid, title=r.title if r else None, type=r.type if r else None, resolved=resolved and r is not None, url=url if isinstance(url, str) else None)

            related = [link(l.target_id, l.resolved) for l in links if l.kind == "related"]
            sources = [link(l.target_id, l.resolved) for l in links if l.kind == "sources"]
            seen: set[str] = set()
            backlinks = []
            for b in sorted(back, key=lambda b: b.source_id):
                if b.source_id not in seen and b.source_id != page_id:
                    seen.add(b.source_id)
                    backlinks.append(link(b.source_id, True))
            snippets = self.evidence.snippets_with_evidence(conn, page_id=page_id)
        summary: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for snip in snippets:
            if snip.mode in ("sketch", "error"):
                summary["*"][snip.status] += 1
            for target, status in snip.target_status.items():
                summary[target][status] += 1
        return PagePublic(
            id=page.id, title=page.title, type=page.type, path=page.path, meta=meta, html=page.html,
            toc=json.loads(page.toc), sections=sections, related=related, sources=sources,
            backlinks=backlinks, snippets=snippets,
            evidence_summary={t: dict(c) for t, c in summary.items()},
            evidence_text=page_evidence_text(snippets),
            claim_problems=[f"{key}: {why}" for key, why in claim_problems(meta.get("confidence"), meta.get("evidence_level"), facts_from_public(snippets))],
        )  # fmt: skip

    def graph(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            nodes = [
                {"id": r.id, "title": r.title, "type": r.type}
                for r in conn.execute(select(PageRow.id, PageRow.title, PageRow.type).order_by(PageRow.id))
            ]
            edges = [
                {"source": r.source_id, "target": r.target_id, "kind": r.kind}
                for r in conn.execute(LinkRow.__table__.select().where(LinkRow.resolved.is_(True)).order_by(LinkRow.id))
            ]
        return {"nodes": nodes, "edges": edges}

    def health(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            counts = {
                "pages": conn.execute(select(func.count(PageRow.id))).scalar(),
                "files": conn.execute(select(func.count(FileRow.path))).scalar(),
                "files_with_errors": conn.execute(select(func.count(FileRow.path)).where(FileRow.page_id.is_(None))).scalar(),
                "snippets": conn.execute(select(func.count(SnippetRow.id))).scalar(),
                "evidence_records": self.evidence.count(conn),
            }
            diags = [
                f"{d.path}:{d.line}: {d.severity}: {d.message}"
                for d in conn.execute(DiagnosticRow.__table__.select().where(DiagnosticRow.severity == "error").order_by(DiagnosticRow.path, DiagnosticRow.line).limit(50))
            ]
        return {"status": "ok", "database": self.engine.dialect.name, **counts, "errors": diags}

