"""What every stage stands on: atomic files, checkpoints, provenance records, the code's version, /proc,
seeded and counter-based random numbers, device copies, and what a job needs and used."""
