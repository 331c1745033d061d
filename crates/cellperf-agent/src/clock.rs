//! Clocks and pacing.
//!
//! Timestamps that leave the host (probe headers, logs) are CLOCK_REALTIME in ns since the
//! Unix epoch, so logs from both ends line up with captures. Pacing uses CLOCK_MONOTONIC
//! with absolute deadlines `start + i·interval`: an early or late packet never shifts the
//! ones after it, so a 300 s run does not drift (docs/methods.md §2, issue: "no drift over 300 s").

use serde::Serialize;

fn now(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Wall-clock time, ns since the Unix epoch (what probe headers and logs carry).
pub fn realtime_ns() -> i64 {
    now(libc::CLOCK_REALTIME)
}

/// Monotonic time in ns (pacing and durations only; meaningless across hosts).
pub fn mono_ns() -> i64 {
    now(libc::CLOCK_MONOTONIC)
}

/// The last stretch before a deadline is spent spinning: sleeping cannot hit it closer than
/// the scheduler's wake-up latency (tens of µs).
const SPIN_NS: i64 = 40_000;

/// Sets this thread's timer slack to 1 ns (the default 50 µs would add that much error to
/// every sleep). Call once at the start of a pacing thread.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Asks for real-time (SCHED_FIFO) scheduling of this thread, best effort: with it a
/// sleeping pacer wakes within microseconds even on a busy host; without the privilege the
/// thread simply keeps normal scheduling. Only for threads that mostly sleep (a FIFO thread
/// that never blocks would starve its core).
pub fn try_realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 is the calling thread; `param` is valid for the call.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// Blocks until CLOCK_MONOTONIC reaches `deadline_ns`: an absolute sleep, then a short spin.
/// Returns the lateness (now − deadline, ≥ 0) at the moment it returns.
pub fn wait_until(deadline_ns: i64) -> i64 {
    let mut t = mono_ns();
    if deadline_ns - t > SPIN_NS {
        let wake = deadline_ns - SPIN_NS;
        let ts = libc::timespec {
            tv_sec: wake / 1_000_000_000,
            tv_nsec: wake % 1_000_000_000,
        };
        // SAFETY: valid timespec; TIMER_ABSTIME makes an interrupted sleep simply resume.
        while unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        } == libc::EINTR
        {}
        t = mono_ns();
    }
    while t < deadline_ns {
        std::hint::spin_loop();
        t = mono_ns();
    }
    t - deadline_ns
}

/// One NTP-style exchange: t1 client send, t2 server receive, t3 server send, t4 client
/// receive (each on its own host's realtime clock).
#[derive(Debug, Clone, Copy)]
pub struct TimeSample {
    pub t1: i64,
    pub t2: i64,
    pub t3: i64,
    pub t4: i64,
}

impl TimeSample {
    /// Server clock minus client clock, assuming a symmetric path.
    pub fn offset_ns(&self) -> i64 {
        ((self.t2 - self.t1) + (self.t3 - self.t4)) / 2
    }
    /// Round trip excluding the server's turnaround.
    pub fn delay_ns(&self) -> i64 {
        (self.t4 - self.t1) - (self.t3 - self.t2)
    }
}

/// The clock offset recorded with every run.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ClockOffset {
    /// Server clock minus probe clock (ms), from the exchange with the smallest delay.
    pub offset_ms: f64,
    /// Half that exchange's round trip: the true offset lies within ± this (ms).
    pub uncertainty_ms: f64,
    pub samples: u32,
    pub method: &'static str,
}

/// Picks the exchange with the least delay (least queueing, so least asymmetry), as NTP's
/// clock filter does.
pub fn estimate_offset(samples: &[TimeSample]) -> Option<ClockOffset> {
    let best = samples
        .iter()
        .filter(|s| s.delay_ns() >= 0)
        .min_by_key(|s| s.delay_ns())?;
    Some(ClockOffset {
        offset_ms: best.offset_ns() as f64 / 1e6,
        uncertainty_ms: best.delay_ns() as f64 / 2e6,
        samples: samples.len() as u32,
        method: "ntp-min-delay",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_from_least_delayed_exchange() {
        // Server 5 ms ahead; symmetric 1 ms paths except one exchange queued 20 ms one way.
        let mk = |t1: i64, up: i64, down: i64| TimeSample {
            t1,
            t2: t1 + up + 5_000_000,
            t3: t1 + up + 5_000_000 + 10,
            t4: t1 + up + down + 10,
        };
        let s = [mk(0, 21_000_000, 1_000_000), mk(100, 1_000_000, 1_000_000)];
        let o = estimate_offset(&s).unwrap();
        assert_eq!(o.offset_ms, 5.0);
        assert_eq!(o.uncertainty_ms, 1.0);
        assert!(estimate_offset(&[]).is_none());
    }
}
