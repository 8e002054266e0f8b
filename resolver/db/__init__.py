"""The database layer: the only package that imports psycopg or SQLAlchemy."""
