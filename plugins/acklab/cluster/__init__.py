"""Cluster provisioning (the *cluster* seam): start, fault-ready control and teardown of Kafka nodes."""
