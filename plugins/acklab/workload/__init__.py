"""Producer load (the *workload* seam): sends uniquely identified messages and records every fate."""
