"""Settings of both daemons, one module each, so that neither daemon's settings load the other's code.

Only this package reads the environment; everything else receives a settings object.
"""
