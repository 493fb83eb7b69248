"""A run's results: the figures computed from a job table (metrics), the run folder's files
(outputs) and its identity and status (runfolder)."""
