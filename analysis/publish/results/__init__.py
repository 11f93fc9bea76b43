"""The paper's results as functions of the dataset: speed, memory, instruction counts, ablations, the
kernel's share, hosts, servers, the field's published figures, the run summary and the explore notebook's views."""
