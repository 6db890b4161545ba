"""Everything that speaks SQL: models, engines, queries, migrations."""
