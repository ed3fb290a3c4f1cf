"""Text handling shared by every search backend: GPU-identifier-aware terms, typo distance, excerpts.

GPU identifiers are words here: `cp.async.bulk.tensor.2d`, `shared::cluster`,
`__syncthreads`, `expect_tx`. Indexed text gets each compound identifier a
second time in joined form (`cp_async_bulk_tensor_2d`) plus its parts, so a
prefix query for the joined form of `cp.async.bulk` finds it, and `tensor`
alone finds it too.
"""

from __future__ import annotations

import html
import re

IDENTIFIER = re.compile(r"\w+(?:(?:\.|::)\w+)*")
"""A word, or words joined by '.' or '::' (PTX mnemonics, CUDA scopes)."""

MAX_TERMS = 32
"""Query terms beyond this are dropped: a 10 kB query is cut, not refused."""


def joined(token: str) -> str:
    """`cp.async.bulk` → `cp_async_bulk`; `shared::cluster` → `shared_cluster`."""
    return token.lower().replace("::", "_").replace(".", "_")


def expand(text: str) -> str:
    """Index form of a text: the text, then the joined form and parts of each compound token."""
    extra: list[str] = []
    for match in IDENTIFIER.finditer(text):
        token = match.group(0)
        compound = "." in token or ":" in token
        parts = re.split(r"\.|::", token) if compound else [token]
        if compound:
            # Every suffix, joined: a prefix query then finds any run of parts (shared::cluster
            # inside cp.async.bulk.tensor.2d.shared::cluster.global...).
            extra.extend(joined(".".join(parts[i:])) for i in range(len(parts) - 1))
        for part in parts:
            if "_" in part:
                stripped = part.strip("_")
                if compound:
                    extra.append(part)
                if stripped and stripped != part:
                    extra.append(stripped)
                extra.extend(p for p in stripped.split("_") if p)
    if not extra:
        return text
    return text + "\n" + " ".join(extra)


def query_terms(query: str) -> list[str]:
    """The search terms of a user query, lowercased and joined; everything else is ignored."""
    terms: list[str] = []
    for match in IDENTIFIER.finditer(query):
        term = joined(match.group(0)).strip("_") if not match.group(0).startswith("__") else joined(match.group(0))
        if term and term not in terms:
            terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    return terms


def edit_distance(a: str, b: str, limit: int) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment), giving up past `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            value = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                value = min(value, before[j - 2] + 1)
            cur.append(value)
        if min(cur) > limit:
            return limit + 1
        before, prev = prev, cur
    return prev[-1]


def typo_limit(term: str) -> int:
    """Edits allowed for a term: none under five letters, one up to seven, two beyond."""
    if len(term) < 5 or not term.isalpha():
        return 0
    return 1 if len(term) <= 7 else 2


def correct(term: str, vocabulary: dict[int, list[str]]) -> str | None:
    """The closest vocabulary word within the term's typo limit, or None (ties: the shorter, then alphabetical)."""
    limit = typo_limit(term)
    if limit == 0:
        return None
    best: tuple[int, int, str] | None = None
    for length in range(len(term) - limit, len(term) + limit + 1):
        for word in vocabulary.get(length, ()):
            d = edit_distance(term, word, limit)
            if d <= limit and d > 0 and (best is None or (d, len(word), word) < best):
                best = (d, len(word), word)
    return None if best is None else best[2]


def excerpt(text: str, terms: list[str], width: int = 200) -> str:
    """An HTML-escaped window of `text` around the first matching term, matches in <mark>."""
    words = {t for term in terms for t in {term, *term.split("_")} if len(t) >= 2}
    patterns = sorted(words, key=len, reverse=True)
    # Match the user's term in its original spelling: '_' in a joined term may be '.', '::' or '_'.
    regex = (
        re.compile("|".join(re.escape(p).replace("_", r"(?:_|\.|::)") for p in patterns), re.IGNORECASE)
        if patterns
        else None
    )
    flat = " ".join(text.split())
    first = regex.search(flat) if regex else None
    start = max(0, (first.start() if first else 0) - width // 3)
    window = flat[start : start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(flat) else ""
    if regex is None:
        return prefix + html.escape(window) + suffix
    out: list[str] = []
    pos = 0
    for m in regex.finditer(window):
        out.append(html.escape(window[pos : m.start()]))
        out.append("<mark>" + html.escape(m.group(0)) + "</mark>")
        pos = m.end()
    out.append(html.escape(window[pos:]))
    return prefix + "".join(out) + suffix
