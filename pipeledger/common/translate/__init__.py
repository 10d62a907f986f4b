"""PostgreSQL SQL translated for SQLite completely, or refused before anything runs."""
