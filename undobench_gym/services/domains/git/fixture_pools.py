"""What the seeded repositories draw from: names, people, fixes, features, release notes,
and the text of the files their commits change."""

from __future__ import annotations

REPO_POOL = [
    ("payments-api", "Payment processing API"),
    ("web-storefront", "Customer-facing web shop"),
    ("infra-config", "Shared infrastructure configuration"),
    ("search-service", "Product search backend"),
    ("auth-gateway", "Login and token gateway"),
    ("mobile-backend", "Backend for the mobile apps"),
]
PEOPLE = [
    ("Ada Lovelace", "ada@example.com"),
    ("Grace Hopper", "grace@example.com"),
    ("Linus Torvalds", "linus@example.com"),
    ("Barbara Liskov", "barbara@example.com"),
    ("Ken Thompson", "ken@example.com"),
    ("Radia Perlman", "radia@example.com"),
]
FIXES = [
    ("Fix off-by-one in pagination", "    page = request.page", "    page = max(request.page, 1)"),
    (
        "Fix timezone handling in reports",
        "    stamp = request.time",
        "    stamp = to_utc(request.time)",
    ),
    (
        "Fix rounding of refund amounts",
        "    amount = request.amount",
        "    amount = round_cents(request.amount)",
    ),
    ("Fix thundering herd on upstream timeouts", "    backoff = 0", "    backoff = jitter(2)"),
    (
        "Fix crash on empty search query",
        "    query = request.query",
        "    query = request.query or ''",
    ),
]
FEATURES = [
    ("bulk-export", "Bulk export"),
    ("saved-searches", "Saved searches"),
    ("webhook-retries", "Webhook retries"),
    ("audit-trail", "Audit trail"),
    ("rate-cards", "Rate cards"),
    ("gift-wrapping", "Gift wrapping"),
]
FIRST_NOTES = [
    "- First release of {name}.",
    "- First public release of {name}.",
    "- First production release of {name}.",
]


def app_source(description: str, line: str) -> str:
    """src/app.py: a request handler whose one varying line a fix changes."""
    return (
        f'"""{description}: request handler."""\n\n\n'
        f"def handle(request):\n{line}\n    return respond(request)\n"
    )


def settings_ini(name: str, level: str, workers: int, timeout: int | None) -> str:
    """config/settings.ini at a log level, with a request timeout once one is set."""
    text = f"[service]\nname = {name}\nlog_level = {level}\nworkers = {workers}\n"
    return text + (f"request_timeout = {timeout}\n" if timeout is not None else "")
