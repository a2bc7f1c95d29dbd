"""The neutral route's bash templates, installed as package data (see sidecar.hook)."""
