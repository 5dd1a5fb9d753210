"""The parent's engine: the pool of parked, isolated workers (``pool.py``; a worker as the parent holds it,
``workers.py``; the uid block each pool's slots run under, ``uids.py``), driving one execution through a
worker (``runner.py``) and the pre-created cgroups each run is accounted in (``cgroups.py``). The read-only
cache the jails share (Go's) is ``langs/gocache.py``.
"""
