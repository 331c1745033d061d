//! Traffic agents: `cellperf server` at the correspondent node and `cellperf probe` at the mobile node.
