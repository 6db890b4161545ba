"""Everything that speaks SQL: the tables, engines, queries, migrations."""
