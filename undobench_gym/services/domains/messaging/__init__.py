"""Messaging: pager alerts, chat, SMS, email batches and webhooks delivered over HTTP."""
