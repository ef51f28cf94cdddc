"""One turn's machinery: the private wing behind :class:`mainspring.Session`.

A session hands each stream to these modules: the run (lease, journal, producer and
consumer), the loop that calls the model, the dispatcher that runs tools one decision at a
time, and recovery after a crash. Nothing outside ``session``, ``_direct`` and ``demo``
imports them, and this package imports nothing itself, so ``from mainspring import
Session`` stays light.
"""
