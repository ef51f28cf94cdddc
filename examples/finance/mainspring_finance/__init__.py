"""The finance example: a ledger, its tools, the finance guards and the demo agent.

```python
demo = await finance_demo()  # an in-memory ledger, offline
session = Session(demo.agent)
```
"""

from mainspring_finance.demo import (
    FINANCE_MESSAGE,
    SKILLS_DIR,
    FinanceDemo,
    execute_client_transfer,
    finance_agent,
    finance_demo,
)
from mainspring_finance.guards import finance_guards
from mainspring_finance.ledger import Ledger, LedgerError, Quote
from mainspring_finance.tools import QuoteBook, finance_tools, snapshot_text

__all__ = [
    "FINANCE_MESSAGE",
    "SKILLS_DIR",
    "FinanceDemo",
    "Ledger",
    "LedgerError",
    "Quote",
    "QuoteBook",
    "execute_client_transfer",
    "finance_agent",
    "finance_demo",
    "finance_guards",
    "finance_tools",
    "snapshot_text",
]
