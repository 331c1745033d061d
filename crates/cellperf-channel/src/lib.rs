//! Per-slot channel-rate traces (METHODS §7–§8): statistics, Markov models and the PF/RR slot scheduler.
