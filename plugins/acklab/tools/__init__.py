"""Developer tools outside the runtime: benchmarks and the protocol capture. No runtime module
imports this package (the architecture test checks it)."""
