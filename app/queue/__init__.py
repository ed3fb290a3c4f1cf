"""The PostgreSQL job queue: its tasks, the scheduler, the GPU worker and its verification job, and `kernelwiki queue`.

Above app.store: the scheduler and worker read the index through it.
"""
