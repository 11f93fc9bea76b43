"""The contract: the one owner of the data format (the tables' schemas, the run directory, the dataset's runs
read once per process, the host's identity, the debates' questions, the security weights, a run packed for
contribution). Imports nothing above it."""
