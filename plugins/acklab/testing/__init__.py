"""Test support outside the runtime: synthetic evidence and stand-in images. No runtime module
imports this package (the architecture test checks it)."""
