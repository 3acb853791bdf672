"""mitmproxy addons that make a stack's fault proxy: one concern per addon."""
