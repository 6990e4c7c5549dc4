"""Training stage: registered training modes, adversarial losses and the per-run outputs."""
