"""The lowest layer: wiki pages, their architectures, and their fenced code blocks as verifiable `Snippet`s.

Needs only the standard library, PyYAML and markdown-it-py, so that the runner
can use it on GPU nodes without the service's web stack. Nothing here imports
`runner` or `app` (tests/test_layers.py checks it).
"""

from snippets.architectures import ANY_TARGET, KNOWN_ARCHITECTURES, normalize_architecture, target_of
from snippets.attributes import KNOWN_ATTRIBUTES, LANGUAGES, InfoStringError, parse_attributes
from snippets.build import PRELUDE, TranslationUnit, build_translation_unit
from snippets.diagnostic import Diagnostic
from snippets.extract import content_hash, extract_snippets
from snippets.snippet import ChainPart, Snippet

__all__ = [
    "ANY_TARGET",
    "KNOWN_ARCHITECTURES",
    "KNOWN_ATTRIBUTES",
    "LANGUAGES",
    "PRELUDE",
    "ChainPart",
    "Diagnostic",
    "InfoStringError",
    "Snippet",
    "TranslationUnit",
    "build_translation_unit",
    "content_hash",
    "extract_snippets",
    "normalize_architecture",
    "parse_attributes",
    "target_of",
]
