"""Build, release and smoke-test tools run from a checkout (not part of the installed package)."""
