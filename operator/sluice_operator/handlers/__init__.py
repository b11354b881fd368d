"""Handler bodies; the Kopf decorators that call them live in sluice_operator.main."""
