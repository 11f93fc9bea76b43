"""Timing a campaign: the campaign itself and its run folder (measure, its trials in the base room's randomized
blocks), two configurations paired in lockstep by one driver (lockstep, with lockstep.c beside it) and a brought
program taking turns with the baseline from outside (alternation, with alternate.c beside it), both run by
driven_pair's scaffolding. It may import the base room (process), the catalogue (allocators), what runs
(workloads) and the mechanisms measured beside the time (mechanisms); no room below imports it."""
