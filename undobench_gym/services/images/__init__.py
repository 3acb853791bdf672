"""Dockerfiles for the stack image (package data)."""
