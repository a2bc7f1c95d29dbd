"""The neutral route's bash templates, installed as package data (see repeat_failure.sidecar.hook)."""
