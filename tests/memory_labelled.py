"""A small labelled recall set: memories, and for each query the memories it should find.

Shipped with the tests (and read by ``bench/memory_recall.py``). The queries
ask in other word forms than the memories use ("deploy" for "deployments",
"allergic" for "allergy"), the way people do, so full-text search that needs
the same word misses some of them; the offline HashingEmbedder shares
character trigrams across such forms. It is *lexical-ish*, not semantic: a
query that shares no word piece with its memory is missed by both.
"""

from __future__ import annotations

MEMORIES: dict[str, str] = {
    "deploy": "Production deployments happen on Friday afternoons after the freeze.",
    "units": "The user prefers metric units for every measurement.",
    "allergy": "Sam has a severe peanut allergy; never suggest satay.",
    "timezone": "The team works from Lisbon, in the Western European timezone.",
    "billing": "Invoices are billed monthly through the Stripe account ending 4242.",
    "editor": "Alex edits code in Neovim with a custom colourscheme.",
    "coffee": "The user drinks oat-milk flat whites, never sugar.",
    "backup": "Database backups run nightly at 02:00 UTC to cold storage.",
    "language": "Replies should be written in British English spelling.",
    "pets": "Maria has two cats called Pixel and Vector.",
    "meeting": "The weekly planning meeting is on Mondays at ten.",
    "budget": "The marketing budget for the quarter is capped at 20k euros.",
    "travel": "The user travels by train whenever the trip is under six hours.",
    "runtime": "The service runs on Python 3.11 inside Debian containers.",
    "security": "Two-factor authentication is mandatory for all administrators.",
    "birthday": "Priya's birthday is on the third of March.",
    "diet": "Jonas is vegetarian and avoids fish as well.",
    "hosting": "Static assets are hosted on a CDN in front of object storage.",
    "review": "Every pull request needs two approving reviewers before merging.",
    "oncall": "The on-call rotation changes every Wednesday morning.",
    "printer": "The office printer on floor two jams with glossy paper.",
    "parking": "Visitors park in the underground garage, level minus one.",
    "reading": "The user is reading a history of the Byzantine empire.",
    "gym": "Training sessions at the gym are on Tuesdays and Thursdays.",
    "logging": "Application logs are retained for ninety days.",
}

QUERIES: list[tuple[str, set[str]]] = [
    ("when are deploys scheduled?", {"deploy"}),
    ("metrical unit preference?", {"units"}),
    ("allergic to peanuts?", {"allergy"}),
    ("teams timezones?", {"timezone"}),
    ("bills invoiced how often?", {"billing"}),
    ("what editor does Alex use for coding?", {"editor"}),
    ("how does the user take their coffee?", {"coffee"}),
    ("nightly backup schedule", {"backup"}),
    ("spelling conventions for replies", {"language"}),
    ("what are Maria's cat names?", {"pets"}),
    ("when is the planning meeting?", {"meeting"}),
    ("how big is the marketing budget?", {"budget"}),
    ("does the user travel by plane or train?", {"travel"}),
    ("which python version do the containers run?", {"runtime"}),
    ("is two factor auth required for admins?", {"security"}),
    ("when is Priya's birthday?", {"birthday"}),
    ("vegetarians and fishes", {"diet"}),
    ("where are the static assets hosted?", {"hosting"}),
    ("reviewing pull requests", {"review"}),
    ("when does on-call change?", {"oncall"}),
    ("printers jamming", {"printer"}),
    ("visitor parking garages", {"parking"}),
    ("what book is the user reading?", {"reading"}),
    ("gyms trainings weekly", {"gym"}),
    ("log retention", {"logging"}),
]


def recall_at(k: int, found: dict[str, list[str]]) -> float:
    """Mean recall@k: the share of each query's relevant keys among its first ``k`` found."""
    total = 0.0
    for query, relevant in QUERIES:
        hits = relevant & set(found[query][:k])
        total += len(hits) / len(relevant)
    return total / len(QUERIES)
