"""The read-only web dashboard: server-rendered pages and their JSON twins, each read
through :mod:`pipeledger.api` (see :mod:`pipeledger.web.app`)."""
