"""Training at smoke scale: a tiny local policy, the rule sets it trains under, and the trainers' own
loops (TRL's GRPOTrainer and SFTTrainer) driving `KernelEnv` for a few real optimizer steps."""
