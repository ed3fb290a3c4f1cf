"""A try unit and how it runs, wherever it runs: the request made into a snippet (`unit`), the runner's verify path
and the record it ends with (`execute`), and the queue task a GPU worker runs it with (`jobs`).

Below app.store and app.queue (tests/test_layers.py): the queue's tasks and worker import `jobs`; nothing here
imports the rest of app/.
"""
