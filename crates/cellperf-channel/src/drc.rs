//! The EV-DO (1xEV-DO Rev. A, forward link) DRC table: the rate a terminal requests with
//! each Data Rate Control index, one index per 1.667 ms slot (002 §2). Index 0 is the null
//! rate (the terminal asks for nothing). Several indices share a rate (they differ in how
//! many slots a packet spans), which is why states are indices and rates come from a table.

/// EV-DO slot length: 1/600 s.
pub const SLOT_S: f64 = 1.0 / 600.0;

/// Rate of DRC index i, in bit/s, for i = 0..=14.
pub const RATES_BPS: [f64; 15] = [
    0.0, 38_400.0, 76_800.0, 153_600.0, 307_200.0, 307_200.0, 614_400.0, 614_400.0, 921_600.0,
    1_228_800.0, 1_228_800.0, 1_843_200.0, 2_457_600.0, 1_536_000.0, 3_072_000.0,
];

#[cfg(test)]
mod tests {
    #[test]
    fn fifteen_states_from_null_to_3072_kbps() {
        assert_eq!(super::RATES_BPS.len(), 15);
        assert_eq!(super::RATES_BPS[1], 38_400.0);
        assert_eq!(super::RATES_BPS.iter().cloned().fold(0.0, f64::max), 3_072_000.0);
    }
}
