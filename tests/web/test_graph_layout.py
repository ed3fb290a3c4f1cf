"""app.web.graph: the server-side layout of the graph view, kept per graph content."""

from __future__ import annotations

from typing import Any

from app.web.graph import HEIGHT, WIDTH, layout


def _graph(n: int, extra: tuple[str, str] | None = None) -> dict[str, Any]:
    nodes = [{"id": f"p{i}", "title": f"Page {i}", "type": "technique" if i % 2 else "hardware", "degree": 2} for i in range(n)]
    edges = [{"source": f"p{i}", "target": f"p{(i + 1) % n}", "kind": "related"} for i in range(n)]
    if extra:
        edges.append({"source": extra[0], "target": extra[1], "kind": "link"})
    return {"nodes": nodes, "edges": edges, "total_nodes": n, "total_edges": len(edges)}


def test_a_graph_with_the_same_pages_and_links_is_laid_out_once() -> None:
    # After a reindex the route's cache (keyed by index generation) misses; the layout of an unchanged graph does not.
    first = layout(_graph(40))
    assert layout(_graph(40)) is first
    changed = layout(_graph(40, extra=("p0", "p20")))
    assert changed is not first
    assert [(e.source, e.target) for e in changed.edges][-1] == ("p0", "p20")


def test_every_node_is_drawn_inside_the_box() -> None:
    drawn = layout(_graph(120))
    assert len(drawn.nodes) == 120
    assert all(0 <= n.x <= WIDTH and 0 <= n.y <= HEIGHT for n in drawn.nodes)
    assert len({(n.x, n.y) for n in drawn.nodes}) == 120  # no two pages on one spot
