"""Full-text search over the SQL index: the tantivy engine and the text rules of indexing and querying."""

from app.search.engine import FACETS, SearchEngine, parse_facets

__all__ = ["FACETS", "SearchEngine", "parse_facets"]
