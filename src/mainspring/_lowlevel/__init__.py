"""The cheap primitives: where mainspring's speed tricks are allowed to live.

Everything here is small, generic and knows nothing of agents: a dataclass decorator that
generates plain constructors, an asyncio task group that runs a single task without one, an
event, a relay between producer and consumer, background tasks, deadlines, lazy imports and
the JSON value type. Each exists because the instruction-count benchmark
(``bench/peers/instructions.py``) showed the library version costing a measurable share of a
turn; each module's docstring says what it replaces and what it pays. Code outside this
package uses these primitives by name and carries no speed tricks of its own.

Modules here import nothing from mainspring outside ``_lowlevel``.
"""
