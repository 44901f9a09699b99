"""The plan seam: the params a user chooses and the validated plan made from them once per run
(`planner`), and the named experiments of the field notes and the bug library (`presets`)."""
