"""The untrusted worker process: the only code that imports a candidate. It answers the judge's requests
(`wire/protocol.py`) and imports nothing of the project but the wire and the Landlock primitive."""
