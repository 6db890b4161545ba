"""Events of interest and the hooks told about them (issue 16).

`outbox` writes an event in the transaction of the transition that caused
it; `courier` hands events to the configured hooks after commit.
"""
