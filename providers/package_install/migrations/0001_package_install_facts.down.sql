-- Rolled back only below the resolver release that brought providers' own schemas, where
-- release 0.1.0's own tables are these very tables: they stay, with their rows.
SELECT 1;
