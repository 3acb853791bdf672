"""Test doubles: stand-ins for outside services that the tests drive (not shipped)."""
