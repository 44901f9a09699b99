"""docs/faults.md is generated from the `FAULTS` registry and names every fault and option."""

from __future__ import annotations

from acklab.nemesis import catalog_doc
from acklab.nemesis.faults import FAULTS


def test_docs_faults_is_current() -> None:
    assert catalog_doc.DOC.read_text() == catalog_doc.fault_catalog_markdown(), "docs/faults.md is stale: run `acklab fault-catalog`"


def test_every_fault_and_option_is_in_the_catalog() -> None:
    text = catalog_doc.fault_catalog_markdown()
    for spec in FAULTS.values():
        section = text.split(f"## `{spec.name}`\n", 1)[1].split("\n## ", 1)[0]
        assert "**evidence it took effect**" in section, spec.name
        for option in spec.options.model_fields:
            assert f"| `{option}` |" in section, (spec.name, option)
