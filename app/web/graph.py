"""The related-pages graph laid out on the server, drawn as inline SVG (no fetch, no script needed).

A deterministic force-directed layout (Fruchterman–Reingold, fixed start on a
circle grouped by page type) of at most `GRAPH_NODES` nodes: the most-linked
pages, or one page's neighbourhood (`Pages.graph`), never the whole of a large
wiki. The pairwise repulsion is O(n²) per iteration, so the iterations shrink
as n grows (at most `PAIR_STEPS`). A layout is kept per graph content (`memoized`):
a reindex that changes no link among the drawn pages (most do not) draws from it
at once, where the route's cache, keyed by the index generation, misses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.cache import memoized

WIDTH, HEIGHT, MARGIN = 1000.0, 720.0, 60.0
ITERATIONS = 120
GRAPH_NODES = 120
"""Nodes drawn at most."""
PAIR_STEPS = 200_000
"""Budget of pairwise repulsion steps for one layout: iterations = min(ITERATIONS, this / (n²/2)), at least 20.

For 120 nodes: 28 iterations, 50 ms of CPU on the loaded 2-core machine (400,000 took 120 ms there,
over the 100 ms a first /graph may take at 10,000 pages, issue 26); the cooling keeps the final temperature.
"""
LAYOUTS = 64
"""Layouts kept per process, by graph content."""


@dataclass(frozen=True)
class Node:
    id: str
    title: str
    type: str
    x: float
    y: float
    r: float
    degree: int


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class Layout:
    nodes: list[Node]
    edges: list[Edge]
    width: float = WIDTH
    height: float = HEIGHT

    @property
    def out(self) -> dict[str, list[str]]:
        """Page id → the pages it links to, for the list form of the graph."""
        targets: dict[str, list[str]] = {}
        for e in self.edges:
            targets.setdefault(e.source, []).append(e.target)
        return targets

    @property
    def types(self) -> list[str]:
        return sorted({n.type for n in self.nodes})


def layout(graph: dict[str, Any]) -> Layout:
    """Positions for every node and edge of `Pages.graph()` inside the drawing box (the same graph: the same layout)."""
    nodes = tuple((n["id"], n["title"], n["type"], n.get("degree")) for n in graph["nodes"])
    edges = tuple((e["source"], e["target"], e["kind"]) for e in graph["edges"])
    return _layout(nodes, edges)


@memoized(LAYOUTS)
def _layout(node_rows: tuple[tuple[str, str, str, int | None], ...], edge_rows: tuple[tuple[str, str, str], ...]) -> Layout:
    graph: dict[str, list[dict[str, Any]]] = {
        "nodes": [{"id": i, "title": t, "type": ty, **({"degree": d} if d is not None else {})} for i, t, ty, d in node_rows],
        "edges": [{"source": a, "target": b, "kind": k} for a, b, k in edge_rows],
    }
    nodes = sorted(graph["nodes"], key=lambda n: (n["type"], n["id"]))
    index = {n["id"]: i for i, n in enumerate(nodes)}
    pairs = {
        tuple(sorted((index[e["source"]], index[e["target"]])))
        for e in graph["edges"]
        if e["source"] in index and e["target"] in index and e["source"] != e["target"]
    }
    n = len(nodes)
    if n == 0:
        return Layout([], [])
    degree = [0] * n
    for a, b in pairs:
        degree[a] += 1
        degree[b] += 1
    xs = [math.cos(2 * math.pi * i / n) * WIDTH / 3 for i in range(n)]
    ys = [math.sin(2 * math.pi * i / n) * HEIGHT / 3 for i in range(n)]
    k = math.sqrt(WIDTH * HEIGHT / n) * 0.9
    k2 = k * k
    temp = WIDTH / 8
    iterations = max(20, min(ITERATIONS, int(PAIR_STEPS / max(1, n * (n - 1) // 2))))
    cooling = 0.96 ** (ITERATIONS / iterations)  # the same final temperature in fewer steps
    for _ in range(iterations):
        dx = [0.0] * n
        dy = [0.0] * n
        for i in range(n):
            xi, yi = xs[i], ys[i]
            fx = fy = 0.0  # node i's sum in locals: 15% less CPU than adding into dx[i] per pair
            for j in range(i + 1, n):
                ddx = xi - xs[j]
                ddy = yi - ys[j]
                f = k2 / (ddx * ddx + ddy * ddy or 0.01)  # repulsion k²/d, along the unit vector: k²/d² · (dx, dy)
                ddx *= f
                ddy *= f
                fx += ddx
                fy += ddy
                dx[j] -= ddx
                dy[j] -= ddy
            dx[i] += fx
            dy[i] += fy
        for a, b in pairs:
            ddx, ddy = xs[a] - xs[b], ys[a] - ys[b]
            d = math.sqrt(ddx * ddx + ddy * ddy) or 0.01
            f = d / k  # attraction d²/k along the unit vector
            dx[a] -= ddx * f
            dy[a] -= ddy * f
            dx[b] += ddx * f
            dy[b] += ddy * f
        for i in range(n):
            # gravity keeps unconnected pages on screen
            dx[i] -= xs[i] * 0.01
            dy[i] -= ys[i] * 0.01
            d = math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) or 0.01
            step = min(d, temp)
            xs[i] += dx[i] / d * step
            ys[i] += dy[i] / d * step
        temp = max(temp * cooling, 1.0)
    _pull_in_outliers(xs, ys)
    min_x, max_x, min_y, max_y = min(xs), max(xs), min(ys), max(ys)
    sx = (WIDTH - 2 * MARGIN) / ((max_x - min_x) or 1)
    sy = (HEIGHT - 2 * MARGIN) / ((max_y - min_y) or 1)
    px = [MARGIN + (x - min_x) * sx if n > 1 else WIDTH / 2 for x in xs]
    py = [MARGIN + (y - min_y) * sy if n > 1 else HEIGHT / 2 for y in ys]
    # A node's size shows its links in the whole wiki (`degree` from Pages.graph), not only those drawn.
    whole = [int(nd.get("degree", degree[i])) for i, nd in enumerate(nodes)]
    out_nodes = [
        Node(
            nd["id"],
            nd["title"],
            nd["type"],
            round(px[i], 1),
            round(py[i], 1),
            round(5 + 2.2 * math.sqrt(min(whole[i], 100)), 1),
            whole[i],
        )
        for i, nd in enumerate(nodes)
    ]
    edges = []
    seen = set()
    for e in graph["edges"]:
        src, dst = index.get(e["source"]), index.get(e["target"])
        if src is None or dst is None or src == dst or (src, dst) in seen:
            continue
        seen.add((src, dst))
        edges.append(
            Edge(e["source"], e["target"], e["kind"], round(px[src], 1), round(py[src], 1), round(px[dst], 1), round(py[dst], 1))
        )
    return Layout(out_nodes, edges)


def _pull_in_outliers(xs: list[float], ys: list[float], factor: float = 1.4) -> None:
    """Bring far-flung nodes (one link, pushed out by everyone) to `factor` × the median radius,
    so they don't squeeze the well-connected core into a corner of the drawing."""
    n = len(xs)
    if n < 4:
        return
    cx, cy = sum(xs) / n, sum(ys) / n
    radii = [math.hypot(x - cx, y - cy) for x, y in zip(xs, ys, strict=True)]
    limit = sorted(radii)[n // 2] * factor
    for i, r in enumerate(radii):
        if r > limit > 0:
            xs[i] = cx + (xs[i] - cx) * limit / r
            ys[i] = cy + (ys[i] - cy) * limit / r
