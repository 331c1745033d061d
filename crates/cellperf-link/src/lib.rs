//! The cellular link model as composable elements with an injected clock, and the real-time emulator that drives it.
