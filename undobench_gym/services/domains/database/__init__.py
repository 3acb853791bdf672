"""Database: a business-data REST API over SQLite (accounts, orders, dividends, migrations)."""
