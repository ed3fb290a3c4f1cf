"""Full-text search over the SQL index: the tantivy engine, its on-disk generations and the text rules of indexing and querying."""

from app.search.engine import FACETS, SearchEngine, parse_facets
from app.search.folder import search_dir_for
from app.search.searcher import Searcher

__all__ = ["FACETS", "SearchEngine", "Searcher", "parse_facets", "search_dir_for"]
