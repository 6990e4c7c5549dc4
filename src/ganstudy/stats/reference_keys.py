"""The keys a set-up's ``reference`` (a paper's numbers) may hold besides its metrics' names. Apart from the
tables that use them so that the plan, which checks a study's references at every parse of the workflow,
imports neither pandas nor scipy."""

# A paper's cost (time) figure, compared with the study's trial times by tables/reproduction.*.
COST = "cost"
# Training facts besides scores (seed 004's table 1): the epochs table puts them beside ours. Differences in
# hardware and data size make them directions, not tests.
EPOCH_REFERENCES = ("epoch_seconds", "d_loss", "g_loss")
