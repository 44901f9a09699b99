"""Faults (the *nemesis* seam): scheduled, recorded, and confirmed to have taken effect."""
