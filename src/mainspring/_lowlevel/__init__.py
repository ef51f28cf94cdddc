"""The cheap primitives: where mainspring's speed tricks are allowed to live.

Everything here is small, generic and knows nothing of agents: a dataclass decorator that
generates plain constructors, an asyncio task group that runs a single task without one, an
event and the running loop asked cheaply, a relay between producer and consumer, background
tasks, tasks started only when due, ids, deadlines, a package's lazy names and the JSON
value type.
Each exists because the instruction-count benchmark (``bench/peers/instructions.py``) showed
the library version costing at least 3 % of a turn (S1, S2 or the durable S1;
bench/F-figures.md); each module's docstring says what it replaces and what it pays. Code
outside this package uses these primitives by name and carries no speed tricks of its own.

Modules here import nothing from mainspring outside ``_lowlevel``.
"""
