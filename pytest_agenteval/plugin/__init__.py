"""The pytest glue: hooks and start-up checks, items and markers, xdist scheduling, the live
progress line, the controller that aggregates. Nothing below imports this package."""
