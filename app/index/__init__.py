"""The SQL index: its tables and migrations, reading wiki pages and building the index from them.

Lowest of app/'s packages: it imports only the top-level settings, errors,
schemas, lifeline and cache modules (docs/architecture.md).
"""
