"""The model seam: what a setting must show (`guarantees`), the claims users hold beside the
documented ones (`beliefs`), and the model as tables for the docs and Data Docs (`tables`)."""
