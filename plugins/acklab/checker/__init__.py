"""Checks that turn run evidence into verdicts."""
