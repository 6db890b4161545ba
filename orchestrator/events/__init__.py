"""Events of interest and the hooks told about them (issue 16).

An event is written in the transaction of the transition that caused it
(`storage.repo.outbox`, the storage layer's); `courier` hands events to the
configured hooks after commit, `hooks` reads their configuration.
"""
