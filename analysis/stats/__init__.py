"""The statistics: estimators, noise models, intervals, pooling across runs, builds and hosts, the security
score. Pure functions of tables; never imports the harness or publish."""
