"""The untrusted side: the only code that imports a candidate. It answers evaluator.protocol requests."""
