"""Payments: a Stripe-like API (customers, charges, refunds, subscriptions, payouts, wires)."""
