"""The trusted side of verification and profiling. Never imports candidate code."""
