"""The evidence seams meet through: file schemas (`schemas`) and the delivery matrix's contract
(`contract`); the run folder that holds them is `acklab.store`'s."""
