"""The read side's queries: one module per reader, each a function of a
caller's transaction returning frozen rows (dataclasses or tuples), never
SQLAlchemy objects. What a row means and how it is shown stays with the
caller (`api/`, `events/`, `views/`, `web/`, `doctor/`); only the SQL lives
here, so the storage rule holds: nothing outside `storage/` builds a query
(`tests/test_layers.py`).
"""
