"""A Kafka-aware TCP proxy in front of each broker's client listener, for response/request-level faults."""
