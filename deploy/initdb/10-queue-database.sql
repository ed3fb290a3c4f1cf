-- Run once by the postgres image on an empty volume (compose.yaml): the job
-- queue gets its own database next to the index (docs/deploy.md).
CREATE DATABASE kernelwiki_queue;
