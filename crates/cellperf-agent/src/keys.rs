//! The `interactive` application test (docs/methods.md §13, seed 004 §VI.C): keystrokes typed at
//! human intervals into a terminal program (a real `ssh` session in the campaign) through a
//! pseudo-terminal, each timed until its echo comes back.
//!
//! Keystrokes are the letters a..z in turn; echoes come back in order over one TCP
//! connection, so the n-th echoed letter is the n-th keystroke's. Keys are sent on their
//! schedule whether or not the previous echo is back, as a typist does.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use serde::Serialize;

use crate::clock::{mono_ns, realtime_ns};

/// One keystroke: when it was typed (wall clock) and its echo latency (None: no echo).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Keystroke {
    pub index: u64,
    pub sent_ns: i64,
    pub echo_ns: Option<i64>,
}

fn key(i: u64) -> u8 {
    b'a' + (i % 26) as u8
}

/// Takes byte `b` printed at `now` as the echo of the oldest key still waiting, if it is that key.
fn echo(keys: &mut [Keystroke], echoed: &mut usize, b: u8, now: i64) {
    if *echoed < keys.len() && b == key(*echoed as u64) {
        keys[*echoed].echo_ns = Some(now - keys[*echoed].sent_ns);
        *echoed += 1;
    }
}

struct Session {
    master: OwnedFd,
    child: Child,
    seen: Vec<u8>,
}

impl Session {
    fn start(argv: &[String]) -> Result<Session, String> {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two fds; the name, termios and winsize pointers may be null.
        if unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        } != 0
        {
            return Err(format!(
                "cannot open a pseudo-terminal ({})",
                io::Error::last_os_error()
            ));
        }
        // SAFETY: both fds were just returned by openpty and are owned here only.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = |fd: &OwnedFd| fd.try_clone().map(Stdio::from).map_err(|e| e.to_string());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(stdio(&slave)?)
            .stdout(stdio(&slave)?)
            .stderr(stdio(&slave)?);
        // SAFETY: setsid and ioctl are async-signal-safe; the child makes the pty its
        // controlling terminal, as a login does (ssh reads its terminal modes from it).
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?} ({e})", argv[0]))?;
        drop(slave);
        Ok(Session {
            master,
            child,
            seen: Vec::new(),
        })
    }

    /// Reads what the terminal printed until `deadline` (monotonic ns); false at EOF.
    fn read_until(&mut self, deadline: i64, mut on_byte: impl FnMut(u8, i64)) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            let wait_ms = ((deadline - mono_ns()) / 1_000_000).max(0) as i32;
            let mut pfd = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
            if r == 0 {
                return true;
            }
            if r < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return false;
            }
            // SAFETY: reads into a valid buffer of its length.
            let n =
                unsafe { libc::read(self.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return false; // EIO: the program closed the terminal
            }
            let now = realtime_ns();
            for &b in &buf[..n as usize] {
                self.seen.push(b);
                on_byte(b, now);
            }
            if self.seen.len() > 1 << 16 {
                self.seen.drain(..1 << 15);
            }
        }
    }

    fn write(&self, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: writes from a valid buffer of its length.
        let n = unsafe { libc::write(self.master.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n == bytes.len() as isize {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn tail(&self) -> String {
        let text = String::from_utf8_lossy(&self.seen);
        text.lines()
            .map(str::trim)
            .rev()
            .find(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_string()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `argv` on a pseudo-terminal, waits (at most `ready_timeout_ns`) until it prints
/// `ready`, then types `count` keys `interval_ns` apart and waits at most `echo_timeout_ns`
/// after the last one for the echoes still out.
pub fn type_keys(
    argv: &[String],
    ready: &str,
    count: u64,
    interval_ns: u64,
    ready_timeout_ns: i64,
    echo_timeout_ns: i64,
) -> Result<Vec<Keystroke>, String> {
    if argv.is_empty() {
        return Err("no terminal program to run".into());
    }
    let mut s = Session::start(argv)?;
    let deadline = mono_ns() + ready_timeout_ns;
    let marker = ready.as_bytes();
    while !s.seen.windows(marker.len()).any(|w| w == marker) {
        if mono_ns() >= deadline {
            return Err(format!(
                "{} did not start within {:.1} s: {}",
                argv[0],
                ready_timeout_ns as f64 / 1e9,
                s.tail()
            ));
        }
        if !s.read_until((mono_ns() + 50_000_000).min(deadline), |_, _| {}) {
            return Err(format!(
                "{} ended before the session started: {}",
                argv[0],
                s.tail()
            ));
        }
    }
    let mut keys: Vec<Keystroke> = Vec::with_capacity(count as usize);
    let mut echoed = 0usize;
    let start = mono_ns();
    for i in 0..count {
        let open = s.read_until(start + (i * interval_ns) as i64, |b, now| {
            echo(&mut keys, &mut echoed, b, now)
        });
        if !open {
            return Err(format!(
                "{} ended during the session: {}",
                argv[0],
                s.tail()
            ));
        }
        keys.push(Keystroke {
            index: i,
            sent_ns: realtime_ns(),
            echo_ns: None,
        });
        s.write(&[key(i)])
            .map_err(|e| format!("cannot type into {} ({e})", argv[0]))?;
    }
    // The echoes still out, until the last is in or the timeout.
    let deadline = mono_ns() + echo_timeout_ns;
    while echoed < keys.len() && mono_ns() < deadline {
        let slice = (mono_ns() + 50_000_000).min(deadline);
        if !s.read_until(slice, |b, now| echo(&mut keys, &mut echoed, b, now)) {
            break;
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_terminal_echoes_every_key() {
        // `cat` on a pty in canonical mode: the terminal driver echoes each key at once.
        let argv: Vec<String> = ["sh", "-c", "echo READY; exec cat"]
            .map(String::from)
            .to_vec();
        let keys = type_keys(&argv, "READY", 30, 5_000_000, 5_000_000_000, 2_000_000_000).unwrap();
        assert_eq!(keys.len(), 30);
        assert!(
            keys.iter()
                .all(|k| k.echo_ns.is_some_and(|e| (0..1_000_000_000).contains(&e))),
            "{keys:?}"
        );
    }

    #[test]
    fn a_program_that_never_gets_ready_is_named() {
        let argv: Vec<String> = ["sh", "-c", "echo no such host; sleep 5"]
            .map(String::from)
            .to_vec();
        let e = type_keys(&argv, "READY", 3, 1_000_000, 300_000_000, 1_000_000_000).unwrap_err();
        assert!(
            e.starts_with("sh did not start within 0.3 s: no such host"),
            "{e}"
        );
        let argv: Vec<String> = ["sh", "-c", "echo refused; exit 255"]
            .map(String::from)
            .to_vec();
        let e = type_keys(&argv, "READY", 3, 1_000_000, 3_000_000_000, 1_000_000_000).unwrap_err();
        assert!(
            e.starts_with("sh ended before the session started: refused"),
            "{e}"
        );
    }
}
