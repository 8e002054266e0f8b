"""The schema: migrations, the SQL files, the named statements, migration locks."""
