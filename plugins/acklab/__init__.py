"""acklab: reliability regression pipeline for Apache Kafka delivery guarantees."""
