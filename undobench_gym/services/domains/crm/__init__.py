"""CRM: a Salesforce-like API (leads, accounts, contacts, opportunities, SLAs, sequences)."""
