"""The store seam: a run folder's layout and the schema of every file in it (`runs`), the Arrow
schemas of the evidence (`schemas`) and the delivery matrix's columns and identities (`contract`)."""
