"""The web view: a read-only page of the supervision tree, runs, Live sessions,
evaluation reports and telemetry counters, served by `phloem web` (a client process of
the daemon) and updated live with server-sent events.

Modules: access (listen address, token, the per-request check), hub (the one reader of
the daemon, the bounded fan-out to browsers), runs (the record of runs, kept up to
date), history (the sampled series behind the plots), views (server-rendered HTML:
the frame and the live sections), runview and timeline (the runs filter, one run's
timeline), sessionview (one transcript), plots and plotview (inline SVG), app (the
aiohttp routes), serve (run until stopped); static/ holds the page's one stylesheet
and one small script.
"""
