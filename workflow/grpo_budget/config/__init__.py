"""The ground floor of settings: the config schema file, loading and validating a config against it, and the typed
settings every stage reads. It imports no stage: a stage that asks what a setting is asks here."""
