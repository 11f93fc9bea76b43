"""The five debates: their registered questions answered per host and across hosts (pooling runs and
layout builds), the forest figures, the design simulation, the predictions for a new host, and their products."""
