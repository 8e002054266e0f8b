"""`resolver demo`: a private PostgreSQL, seeded crashes and a simulated executor."""
