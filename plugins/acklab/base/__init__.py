"""The foundation every seam stands on: where files live (`paths`), how user specs are validated
(`spec`), and how jars are fetched from Maven Central into the cache (`maven`)."""
