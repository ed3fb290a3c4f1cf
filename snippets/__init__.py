"""Snippet extraction: a wiki page's fenced code blocks as verifiable `Snippet`s.

Needs only the standard library and markdown-it-py, so that the runner can use
it on GPU nodes without the service's web stack.
"""

from snippets.attributes import (
    KNOWN_ARCHITECTURES,
    KNOWN_ATTRIBUTES,
    LANGUAGES,
    InfoStringError,
    normalize_architecture,
    parse_attributes,
    target_of,
)
from snippets.build import PRELUDE, TranslationUnit, build_translation_unit
from snippets.extract import ANY_TARGET, content_hash, extract_snippets
from snippets.snippet import ChainPart, Problem, Snippet

__all__ = [
    "ANY_TARGET",
    "KNOWN_ARCHITECTURES",
    "KNOWN_ATTRIBUTES",
    "LANGUAGES",
    "PRELUDE",
    "ChainPart",
    "InfoStringError",
    "Problem",
    "Snippet",
    "TranslationUnit",
    "build_translation_unit",
    "content_hash",
    "extract_snippets",
    "normalize_architecture",
    "parse_attributes",
    "target_of",
]
