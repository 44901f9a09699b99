# The local Kafka image for the Docker backend, built from files on this host only (no pull):
# `acklab docker image` (acklab.cluster.docker_image) writes rootfs.tar (a Java 17+ runtime and the
# shared libraries it needs, /bin/sh, the Kafka jars of one version from .cache/kafka/<version>) and
# imports it with the instructions below (`docker import --change`, one layer), or `--context DIR`
# writes a context for `docker build DIR`. Like apache/kafka, it has `java` and `sh` on PATH and the jars in
# /opt/kafka/libs, which is all the Docker backend needs of an image.
FROM scratch
ADD rootfs.tar /
ENV PATH=/opt/java/bin:/bin JAVA_HOME=/opt/java
WORKDIR /tmp
CMD ["java", "-version"]
