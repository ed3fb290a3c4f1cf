"""Evidence: storing and checking records, snippet status, claims against evidence, kept SASS/PTX artifacts.

Above app.index (it reads the index's tables); beside app.search, which it does not import.
"""
