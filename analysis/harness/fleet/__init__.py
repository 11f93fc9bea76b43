"""The fleet: a profile's campaigns on many hosts through Snakemake (local or Slurm), and the plan that says
what a profile will do on this machine before it starts."""
