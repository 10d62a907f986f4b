"""The warehouse seam: the SQL dialects, the session protocols adapters implement, and the
migrations every component's tables go through. Nothing here imports a driver."""
