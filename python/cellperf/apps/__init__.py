"""Application tests run by the agents' Rust code rather than a browser (docs/methods.md §13):
`stream` (a constant-bitrate media stream into a playout buffer) and `interactive`
(keystrokes over a real ssh session, timed until their echo)."""
